import AudienceEngine
import Delivery
import FCMRelay
import FCMWire
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import Prometheus
import Registry
import RegistryServer
import ServiceLifecycle

/// `serve`, from a checked configuration to a stopped server, one explicit step after another:
/// nothing is opened before the listeners are known to be able to listen, and nothing runs
/// before the service group starts it.
public enum Serve {
    /// Runs the server until SIGTERM or SIGINT.
    /// - Parameters:
    ///   - announce: told the project and server key `serve` creates on a database without one.
    /// - Throws: `ConfigurationError` (the caller exits 2) when a listener cannot listen, before
    ///   the database is opened; `StoreError` when the database cannot be opened.
    public static func run(
        _ configuration: ServerConfiguration, logger: Logger, metrics: PrometheusCollectorRegistry,
        announce: (Project, String) throws -> Void
    ) async throws {
        var configuration = configuration
        // 1. Descriptors: raised to the hard limit, and the connection limits fitted under it.
        fitConnections(&configuration, logger: logger)
        // 2. Every listener's address, checked before anything is created.
        try await checkListeners(configuration)
        // 3. The store, then the registry over it.
        let started = ContinuousClock.now
        let store = try await StoreFactory.open(
            configuration.storage.database, feedRetention: configuration.limits.feedRetention, logger: logger)
        // Accepted messages go to the log, and for the projects that relay, to the outbox too.
        let handoff = RelayHandoff(serverID: configuration.serverID)
        // Google's device-group API, for the projects that mirror it.
        let mirror = try GoogleGroupMirror(options: configuration.relay, logger: logger)
        let registry = try await RegistryService(
            store: store, limits: configuration.limits,
            sink: RelaySink(
                store: store, limits: configuration.limits, options: configuration.relay, handoff: handoff,
                channels: DeliveryChannels.kinds),
            checkpoint: configuration.storage.resolvedCheckpointPath, mirror: mirror,
            webhookPolicy: configuration.webhooks.urlPolicy)
        // 4. The audience index.
        let startup = try await registry.startAudience()
        logger.info("audience index loaded", metadata: loadedMetadata(registry, startup, since: started))
        // 5. A first project on a new database.
        if try await registry.projects().isEmpty {
            let (project, key) = try await registry.createProject(projectId: "default", senderId: "100000000000")
            try announce(project, key)
        }
        // A project that only records loses every push an app points here: say so where operators look.
        // Read from the store, not through the sink's one-second cache: a `project relay` run just
        // after start must not wait out a cached "no relay".
        for project in try await registry.projectsOnlyRecording() {
            logger.warning(
                "this project only records its messages: nothing reaches a device until `fcm-registry project relay` turns delivery on",
                metadata: ["project.id": "\(project.projectId)"])
        }
        logger.info(
            "serving",
            metadata: [
                "db.path": "\(StoreFactory.describe(configuration.storage.database))", "http.host": "\(configuration.host)",
                "http.port": "\(configuration.http.map { String($0.port) } ?? "off")",
                "https.port": "\(configuration.tls.isConfigured ? String(configuration.tls.settings.port) : "off")",
                "xmpp.port": "\(configuration.xmppListening ? String(configuration.xmpp.port) : "off")",
            ])
        // 6. Every peer in one group.
        // The store's own peers first: the group stops them last, after the listeners' requests.
        let services =
            StoreFactory.services(of: store) + [mirror]
            + (try buildServices(
                registry: registry, configuration: configuration, logger: logger, metrics: metrics, relay: handoff))
        try await runServer(services, configuration: configuration, logger: logger)
    }

    /// Raises the open-file limit and lowers the connection limit of each listener to fit it.
    ///
    /// Every connection holds a descriptor, and so do the database and its readers: past the
    /// limit, opening files fails (SQLite answers "unable to open database file", and the
    /// system's thread pool gives up). The limit applies to each listener: share the descriptors out.
    static func fitConnections(_ configuration: inout ServerConfiguration, logger: Logger) {
        let descriptors = FileDescriptorLimit.raiseToHard()
        logger.info("file descriptor limit", metadata: ["soft": "\(descriptors.soft)", "hard": "\(descriptors.hard)"])
        // Condition checks and audience algebra yield to every other request while they queue up,
        // where the process may take a thread out of SCHED_IDLE again (CAP_SYS_NICE, or ulimit -e ≥ 1).
        logger.info(
            "costly work",
            metadata: ["priority": "\(CostlyWork.yieldsWhenFlooded ? "nice 19, SCHED_IDLE while queued up" : "nice 19")"])
        let reserve = 128
        let share = (Int(descriptors.soft) - reserve) / max(1, configuration.listenerCount)
        if descriptors.soft > 0, configuration.maximumConnections > share {
            let capped = max(1, share)
            logger.warning(
                "connection limit lowered to fit the file descriptor limit",
                metadata: ["configured": "\(configuration.maximumConnections)", "limit": "\(capped)"])
            configuration.maximumConnections = capped
        }
    }

    /// Binds, and at once closes, every port a listener will take, and reads the TLS files: a
    /// busy port, a privileged one without the right, a host that is not this machine's, two
    /// listeners on one port or an unreadable certificate is an error now, before a database is
    /// created or a key printed.
    static func checkListeners(_ configuration: ServerConfiguration) async throws {
        var listeners: [(port: Int, option: String)] = []
        if let http = configuration.http { listeners.append((http.port, ConfigurationWording.httpPortOption)) }
        if configuration.tls.isConfigured {
            listeners.append((configuration.tls.settings.port, ConfigurationWording.tlsPortOption))
        }
        if configuration.xmppListening { listeners.append((configuration.xmpp.port, ConfigurationWording.xmppPortOption)) }
        // Two listeners on one port would pass one at a time and fail together later.
        let ports = listeners.map(\.port).filter { $0 != 0 }
        if Set(ports).count < ports.count {
            throw ConfigurationError(description: ConfigurationWording.twoListenersOnOnePort(listeners))
        }
        if let certificate = configuration.tls.certificate, let key = configuration.tls.key {
            do {
                _ = try TLSConfiguration.server(certificate: certificate, key: key)
            } catch {
                throw ConfigurationError(
                    description: ConfigurationWording.cannotReadTLSFiles(
                        certificate: certificate, key: key, reason: "\(error)"))
            }
        }
        for (port, option) in listeners {
            do {
                let channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
                    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                    .bind(host: configuration.host, port: port).get()
                try await channel.close()
            } catch {
                throw ConfigurationError.cannotListen(
                    host: configuration.host, port: port, option: option, because: error)
            }
        }
    }

    private static func loadedMetadata(_ registry: RegistryService, _ startup: AudienceStartup, since started: ContinuousClock.Instant)
        -> Logger.Metadata
    {
        let size = registry.audience.size()
        var loaded: Logger.Metadata = [
            "subscriptions": "\(size.subscriptions)", "tokens": "\(size.registered)", "index.bytes": "\(size.bytes)",
            "duration": "\(ContinuousClock.now - started)",
        ]
        switch startup.source {
        case .checkpoint(let position, let replayed):
            loaded["from"] = "checkpoint"
            loaded["feed.position"] = "\(position)"
            loaded["feed.replayed"] = "\(replayed)"
        case .tables(let reason):
            loaded["from"] = "tables"
            if let reason { loaded["checkpoint.unused"] = "\(reason)" }
        }
        return loaded
    }
}

