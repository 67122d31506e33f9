import ArgumentParser
import Foundation
import Logging
import Registry
import RegistryServer

/// `fcm-registry serve`: the HTTP server.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve FCM's device-group and topic APIs over HTTP.",
        discussion: """
            On a database with no project, creates one and prints its project id, sender id and server key \
            once, as JSON on stdout. Stops cleanly on SIGINT or SIGTERM.
            """
    )

    @Option(help: "Address to listen on (default: $FCM_REGISTRY_HOST or 127.0.0.1).")
    var host: String?

    @Option(help: "Port to listen on (default: $FCM_REGISTRY_PORT or 8080).")
    var port: Int?

    @OptionGroup var database: DatabaseOptions

    @OptionGroup(title: "Limits") var limits: LimitOptions

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        var logger = Logger(label: "fcm-registry")
        logger.logLevel = environment["LOG_LEVEL"].flatMap(Logger.Level.init(rawValue:)) ?? .info
        let registry = try await database.openRegistry(loadAudience: true, limits: limits.limits)
        if try await registry.store.projects().isEmpty {
            let (project, key) = try await registry.createProject(projectId: "default", senderId: "100000000000")
            try printJSON(ProjectCommand.Created(project: project, serverKey: key))
            fflush(nil)
        }
        let address = ServerAddress(
            host: host ?? environment["FCM_REGISTRY_HOST"] ?? "127.0.0.1",
            port: port ?? environment["FCM_REGISTRY_PORT"].flatMap(Int.init) ?? 8080)
        logger.info("serving", metadata: ["db.path": "\(database.resolvedPath)", "http.port": "\(address.port)"])
        try await buildApplication(registry: registry, address: address, logger: logger).runService()
    }
}
