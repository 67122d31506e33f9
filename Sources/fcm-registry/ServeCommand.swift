import ArgumentParser
import FCMWire
import Foundation
import Logging
import Metrics
import Prometheus
import Registry
import RegistryApp

/// `fcm-registry serve`: the HTTP server. Its options are `ServerConfiguration.options`, one table
/// for flags, environment variables and documentation; a bad value, a busy port or a database that
/// cannot be opened stops it with status 2.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Serve FCM's device-group, topic and message APIs over HTTP.",
        discussion: """
            On a database with no project, creates one and prints its project id, sender id and server key \
            once, as JSON on stdout (or into --key-file). Stops cleanly on SIGINT or SIGTERM. \
            Options (flag, environment variable, default):\n\n
            """ + ServerConfiguration.options.map { "  --\($0.flag) / \($0.variable) (\($0.defaultValue)): \($0.help)" }
            .joined(separator: "\n")
    )

    @Argument(parsing: .allUnrecognized, help: "--option value or --option=value, as listed above.")
    var options: [String] = []

    func run() async throws {
        var configuration: ServerConfiguration
        do {
            configuration = try ServerConfiguration.resolve(
                flags: try Self.flags(options), environment: ProcessInfo.processInfo.environment)
        } catch {
            FileHandle.standardError.write(Data(CommandWording.serveStopped("\(error)").utf8))
            throw ExitCode(2)
        }
        // A --db SQLite cannot use is a bad value like any other: said before anything is logged.
        if let problem = StoreFactory.problem(opening: configuration.storage.database) {
            let error = StoreError(location: configuration.storage.database, reason: problem)
            FileHandle.standardError.write(Data(CommandWording.serveStopped("\(error)").utf8))
            throw ExitCode(2)
        }
        LoggingSystem.bootstrap(EscapingLogHandler.init)
        var logger = Logger(label: "fcm-registry")
        logger.logLevel = configuration.logLevel
        let metrics = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: metrics))
        do {
            try await Serve.run(configuration, logger: logger, metrics: metrics) { project, key in
                try FirstKey.announce(ProjectCommand.Created(project: project, serverKey: key), to: configuration.keyFile)
            }
        } catch let error as ConfigurationError {
            FileHandle.standardError.write(Data(CommandWording.serveStopped("\(error)").utf8))
            throw ExitCode(2)
        } catch let error as StoreError {
            // A database that cannot be opened is a value to fix, as a bad flag is.
            FileHandle.standardError.write(Data(CommandWording.serveStopped("\(error)").utf8))
            throw ExitCode(2)
        }
    }

    /// `--name value` and `--name=value` pairs by name.
    static func flags(_ arguments: [String]) throws(ConfigurationError) -> [String: String] {
        let known = Set(ServerConfiguration.options.map(\.flag))
        let switches = Set(ServerConfiguration.options.filter(\.isSwitch).map(\.flag))
        var flags: [String: String] = [:]
        var index = 0
        while index < arguments.count {
            let argument = arguments[index]
            guard argument.hasPrefix("--") else {
                throw ConfigurationError(description: ConfigurationWording.unexpectedArgument(argument))
            }
            var name = String(argument.dropFirst(2))
            var value: String
            if let equals = name.firstIndex(of: "=") {
                value = String(name[name.index(after: equals)...])
                name = String(name[..<equals])
            } else if switches.contains(name), index + 1 == arguments.count || arguments[index + 1].hasPrefix("--") {
                value = "true"
            } else {
                index += 1
                guard index < arguments.count else {
                    throw ConfigurationError(description: ConfigurationWording.missingValue(name))
                }
                value = arguments[index]
            }
            guard known.contains(name) else {
                throw ConfigurationError(description: ConfigurationWording.unknownOption(name))
            }
            flags[name] = value
            index += 1
        }
        return flags
    }
}

/// Where a new database's first server key goes: a file only its owner can read, or stdout.
enum FirstKey {
    static func announce(_ created: ProjectCommand.Created, to path: String?) throws {
        guard let path else {
            try printJSON(created)
            fflush(nil)
            return
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let data = try encoder.encode(created)
        guard FileManager.default.createFile(atPath: path, contents: data, attributes: [.posixPermissions: 0o600])
        else { throw ValidationError(CommandWording.cannotWriteServerKey(to: path)) }
        FileHandle.standardError.write(Data("fcm-registry: the new project's server key is in \(path)\n".utf8))
    }
}
