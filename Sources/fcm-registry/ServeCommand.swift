import ArgumentParser
import Foundation
import Logging
import Metrics
import Prometheus
import Registry
import RegistrySQLite
import RegistryServer

/// `fcm-registry serve`: the HTTP server. Its options are `ServerConfiguration.options`, one table
/// for flags, environment variables and documentation; a bad value stops it with status 2.
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
            FileHandle.standardError.write(Data("fcm-registry serve: \(error)\n".utf8))
            throw ExitCode(2)
        }
        LoggingSystem.bootstrap(EscapingLogHandler.init)
        var logger = Logger(label: "fcm-registry")
        logger.logLevel = configuration.logLevel
        let metrics = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(PrometheusMetricsFactory(registry: metrics))
        let descriptors = FileDescriptorLimit.raiseToHard()
        logger.info(
            "file descriptor limit", metadata: ["soft": "\(descriptors.soft)", "hard": "\(descriptors.hard)"])
        // Condition checks and audience algebra yield to every other request while they queue up,
        // where the process may take a thread out of SCHED_IDLE again (CAP_SYS_NICE, or ulimit -e ≥ 1).
        logger.info(
            "costly work", metadata: ["priority": "\(CostlyWork.yieldsWhenFlooded ? "nice 19, SCHED_IDLE while queued up" : "nice 19")"])
        // Every connection holds a descriptor, and so do the database and its readers: past the
        // limit, opening files fails (SQLite answers "unable to open database file", and the
        // system's thread pool gives up). Keep connections well below it.
        // The limit applies to each listener (plain HTTP, TLS, XMPP): share the descriptors out.
        let reserve = 128
        let listeners = max(
            1,
            (configuration.plainHTTP ? 1 : 0) + (configuration.tlsCertificate != nil ? 1 : 0)
                + (configuration.xmppListening ? 1 : 0))
        let share = (Int(descriptors.soft) - reserve) / listeners
        if descriptors.soft > 0, configuration.maximumConnections > share {
            let capped = max(1, share)
            logger.warning(
                "connection limit lowered to fit the file descriptor limit",
                metadata: ["configured": "\(configuration.maximumConnections)", "limit": "\(capped)"])
            configuration.maximumConnections = capped
        }

        let started = ContinuousClock.now
        let database = try RegistryDatabase.open(path: configuration.databasePath)
        let registry = try await RegistryService(
            store: SQLiteStore(database, feedRetention: configuration.limits.feedRetention),
            limits: configuration.limits, checkpoint: configuration.resolvedCheckpointPath)
        let size = registry.audience.size()
        var loaded: Logger.Metadata = [
            "subscriptions": "\(size.subscriptions)", "tokens": "\(size.registered)", "index.bytes": "\(size.bytes)",
            "duration": "\(ContinuousClock.now - started)",
        ]
        switch registry.startup?.source {
        case .checkpoint(let position, let replayed)?:
            loaded["from"] = "checkpoint"
            loaded["feed.position"] = "\(position)"
            loaded["feed.replayed"] = "\(replayed)"
        case .tables(let reason)?:
            loaded["from"] = "tables"
            if let reason { loaded["checkpoint.unused"] = "\(reason)" }
        case nil:
            break
        }
        logger.info("audience index loaded", metadata: loaded)
        if try await registry.projects().isEmpty {
            let (project, key) = try await registry.createProject(projectId: "default", senderId: "100000000000")
            try FirstKey.announce(ProjectCommand.Created(project: project, serverKey: key), to: configuration.keyFile)
        }
        logger.info(
            "serving",
            metadata: [
                "db.path": "\(configuration.databasePath)", "http.host": "\(configuration.host)",
                "http.port": "\(configuration.plainHTTP ? String(configuration.port) : "off")",
                "https.port": "\(configuration.tlsCertificate == nil ? "off" : String(configuration.tlsPort))",
                "xmpp.port": "\(configuration.xmppListening ? String(configuration.xmppPort) : "off")",
            ])
        let services = try buildServices(
            registry: registry, configuration: configuration, logger: logger, metrics: metrics)
        try await runServer(services, configuration: configuration, logger: logger)
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
                throw ConfigurationError(description: "unexpected argument '\(argument)'")
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
                    throw ConfigurationError(description: "missing value for --\(name)")
                }
                value = arguments[index]
            }
            guard known.contains(name) else {
                throw ConfigurationError(description: "unknown option --\(name); see fcm-registry serve --help")
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
        else { throw ValidationError("cannot write the server key to \(path)") }
        FileHandle.standardError.write(Data("fcm-registry: the new project's server key is in \(path)\n".utf8))
    }
}
