import ArgumentParser
import FCMWire
import Foundation
import Registry
import RegistryApp
import RegistrySQLite

/// `--db`, shared by every command that opens the database: `serve`'s option of that name, read
/// from the same table (its variable and default), and opened by the same store factory.
struct DatabaseOptions: ParsableArguments {
    static let option = ServerConfiguration.option(named: "db")

    @Option(
        name: .customLong("db"),
        help: "\(Self.option.help.trimmingCharacters(in: ["."])) (default: $\(Self.option.variable) or \(Self.option.defaultValue)).")
    var path: String?

    var resolvedPath: String {
        path ?? ProcessInfo.processInfo.environment[Self.option.variable] ?? Self.option.defaultValue
    }

    /// - Parameters:
    ///   - loadAudience: load the audience index (the server and `audience` need it).
    ///   - limits: by default those `serve` enforces with this environment (`FCM_REGISTRY_GROUP_MEMBERS`, …),
    ///     so that a command writes nothing the server would refuse.
    func openRegistry(loadAudience: Bool = false, limits: Limits? = nil) async throws -> RegistryService {
        let limits = try limits ?? Self.environmentLimits()
        let registry = try await RegistryService(store: try await StoreFactory.open(resolvedPath), limits: limits)
        if loadAudience { try await registry.startAudience() }
        return registry
    }
}

extension DatabaseOptions {
    static func environmentLimits() throws -> Limits {
        do {
            return try ServerConfiguration.limits(environment: ProcessInfo.processInfo.environment)
        } catch {
            throw ValidationError(error.description)
        }
    }
}

/// `--project-id` for inspection commands; may be left out when the database has one project.
struct ProjectOption: ParsableArguments {
    @Option(help: "The project to look into (default: the only one, or $FCM_REGISTRY_PROJECT).")
    var projectId: String?

    func resolve(in registry: RegistryService) async throws -> Project {
        let projects = try await registry.projects()
        let wanted = projectId ?? ProcessInfo.processInfo.environment["FCM_REGISTRY_PROJECT"]
        if let wanted {
            guard let project = projects.first(where: { $0.isNamed(wanted) }) else {
                throw ValidationError(CommandWording.noProject(wanted, projects: projects.map(\.projectId)))
            }
            return project
        }
        guard projects.count == 1 else {
            throw ValidationError(
                projects.isEmpty
                    ? CommandWording.noProjectYet : CommandWording.severalProjects(projects.map(\.projectId))
            )
        }
        return projects[0]
    }
}
