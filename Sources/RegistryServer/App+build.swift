import Hummingbird
import HummingbirdCore
import HummingbirdHTTP2
import Logging
import NIOCore
import NIOSSL
import Prometheus
import Registry
import ServiceLifecycle

/// The whole server over `registry`, as `configuration` says: the HTTP application with its
/// connection limits and deadlines, and the feed follower that keeps the audience index equal to
/// the database whoever writes to it. `serve` and every HTTP test build it here.
///
/// - Parameter metrics: the registry `GET /metrics` shows; the process's swift-metrics factory
///   should write into it (`serve` bootstraps one).
public func buildApplication(
    registry: RegistryService, configuration: ServerConfiguration, logger: Logger,
    metrics: PrometheusCollectorRegistry = PrometheusCollectorRegistry(), xmpp: XMPPHub? = nil
) -> Application<RouterResponder<RegistryRequestContext>> {
    let xmpp = xmpp ?? XMPPHub(configuration: configuration)
    let guardLogger = logger
    let (headerTimeout, bodyTimeout) = (configuration.headerTimeout, configuration.bodyTimeout)
    let silent = SilentConnections(
        spacing: SilentConnections.spacing(
            headerTimeout: headerTimeout, maximumConnections: configuration.maximumConnections),
        logger: logger)
    let slowLog = LogThrottle()
    var application = Application(
        router: buildRouter(registry: registry, metrics: metrics, xmpp: xmpp),
        server: .http1(
            configuration: .init(
                additionalChannelHandlers: [
                    ConnectionGuard(
                        headerTimeout: headerTimeout, bodyTimeout: bodyTimeout, slowLog: slowLog, silent: silent,
                        logger: guardLogger)
                ],
                idleTimeout: TimeAmount(configuration.idleTimeout))),
        configuration: .init(
            address: .hostname(configuration.host, port: configuration.port), serverName: "fcm-registry",
            availableConnectionsDelegate: ConnectionLimit(
                configuration.maximumConnections, makingRoomIn: silent, listener: "http", logger: logger)),
        logger: logger)
    for service in backgroundServices(registry: registry, configuration: configuration, logger: logger) {
        application.addServices(service)
    }
    return application
}

/// What `serve` runs, as `configuration` says: the plain HTTP listener (unless `--port off`),
/// the TLS listener speaking HTTP/2 and HTTP/1.1 by ALPN (with `--tls-cert` and `--tls-key`),
/// the XMPP connection server (with TLS, or `--xmpp-plaintext`), and the background services, once.
public func buildServices(
    registry: RegistryService, configuration: ServerConfiguration, logger: Logger,
    metrics: PrometheusCollectorRegistry
) throws -> [any Service] {
    var services: [any Service] = []
    let xmpp = XMPPHub(configuration: configuration)
    if configuration.plainHTTP {
        services.append(
            buildApplication(
                registry: registry, configuration: configuration, logger: logger, metrics: metrics, xmpp: xmpp))
    }
    if let certificate = configuration.tlsCertificate, let key = configuration.tlsKey {
        let tls = try TLSConfiguration.server(certificate: certificate, key: key)
        let guardLogger = logger
        let (headerTimeout, bodyTimeout) = (configuration.headerTimeout, configuration.bodyTimeout)
        let slowLog = LogThrottle()
        // Until its first request head, a TLS connection is silent: it gives way near the limit,
        // and is closed at the header timeout counted from its first byte.
        let silent = SilentConnections(
            spacing: SilentConnections.spacing(
                headerTimeout: headerTimeout, maximumConnections: configuration.maximumConnections),
            logger: logger)
        let http2 = HTTP2UpgradeChannel.Configuration(
            idleTimeout: configuration.idleTimeout,
            streamConfiguration: .init(
                additionalChannelHandlers: [
                    ConnectionGuard(
                        headerTimeout: headerTimeout, bodyTimeout: bodyTimeout, slowLog: slowLog,
                        announcesFirstRequest: true, logger: guardLogger)
                ],
                idleTimeout: TimeAmount(configuration.idleTimeout)))
        let server = HTTPServerBuilder { responder in
            GuardedChildChannel(
                base: try HTTP2UpgradeChannel(tlsConfiguration: tls, configuration: http2, responder: responder)
            ) {
                FirstRequestDeadline(
                    headerTimeout: headerTimeout, slowLog: slowLog, silent: silent, logger: guardLogger)
            }
        }
        var application = Application(
            router: buildRouter(registry: registry, metrics: metrics, xmpp: xmpp),
            server: server,
            configuration: .init(
                address: .hostname(configuration.host, port: configuration.tlsPort), serverName: "fcm-registry",
                availableConnectionsDelegate: ConnectionLimit(
                    configuration.maximumConnections, makingRoomIn: silent, listener: "https", logger: logger)),
            logger: logger)
        if !configuration.plainHTTP {
            for service in backgroundServices(registry: registry, configuration: configuration, logger: logger) {
                application.addServices(service)
            }
        }
        services.append(application)
    }
    if configuration.xmppListening {
        let tls = try configuration.tlsCertificate.map { certificate in
            try XMPPListener.tlsContext(certificate: certificate, key: configuration.tlsKey ?? "")
        }
        services.append(
            XMPPListener(
                registry: registry, hub: xmpp, host: configuration.host, port: configuration.xmppPort,
                tls: configuration.xmppPlaintext ? nil : tls, settings: configuration.xmpp,
                maximumConnections: configuration.maximumConnections, logger: logger))
    }
    return services
}

extension TLSConfiguration {
    /// A server configuration from a PEM certificate chain and private key, as `tls init` writes
    /// them: what the HTTPS and XMPP listeners both start from.
    static func server(certificate: String, key: String) throws -> TLSConfiguration {
        makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(certificate).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: key, format: .pem)))
    }
}

/// The feed follower and, with a checkpoint file, the checkpoint writer.
func backgroundServices(registry: RegistryService, configuration: ServerConfiguration, logger: Logger) -> [any Service]
{
    var services: [any Service] = [
        FeedFollower(registry: registry, interval: configuration.feedInterval, logger: logger)
    ]
    if registry.checkpointPath != nil {
        services.append(CheckpointWriter(registry: registry, interval: configuration.checkpointInterval, logger: logger))
    }
    return services
}

/// Every route, behind the access log and the error envelope; every route but `/health` and
/// `/metrics` behind the server key.
public func buildRouter(registry: RegistryService, metrics: PrometheusCollectorRegistry, xmpp: XMPPHub) -> Router<
    RegistryRequestContext
> {
    let router = Router(context: RegistryRequestContext.self)
    let serverMetrics = ServerMetrics(registry: metrics)
    router.add(middleware: AccessLogMiddleware(metrics: serverMetrics))
    router.add(middleware: ErrorEnvelopeMiddleware())
    let open = RouteRecorder(router.group())
    open.on("/health", .get) { _, _ in try JSONResponse.make(["status": "ok"]) }
    open.on("/metrics", .get) { _, _ in
        try await MetricsEndpoint.response(registry: registry, metrics: serverMetrics, xmpp: xmpp)
    }
    let oauth = OAuthController(registry: registry)
    oauth.addOpenRoutes(to: open)
    open.addMethodNotAllowed(to: router)

    let routes = RouteRecorder(router.group().add(middleware: AuthMiddleware(registry: registry)))
    DeviceGroupController(registry: registry).addRoutes(to: routes)
    InstanceIDController(registry: registry).addRoutes(to: routes)
    TopicSubscriptionController(registry: registry).addRoutes(to: routes)
    TokenController(registry: registry).addRoutes(to: routes)
    AudienceController(registry: registry).addRoutes(to: routes)
    InspectionController(registry: registry).addRoutes(to: routes)
    LegacySendController(registry: registry).addRoutes(to: routes)
    V1SendController(registry: registry).addRoutes(to: routes)
    MessageController(registry: registry).addRoutes(to: routes)
    XMPPController(registry: registry, hub: xmpp).addRoutes(to: routes)
    oauth.addRoutes(to: routes)
    routes.addMethodNotAllowed(to: router)
    return router
}

/// Runs `application` until SIGTERM or SIGINT, then stops as `configuration` says: no new
/// connections, requests in flight answered until the shutdown deadline, then whatever is left
/// cancelled and closed.
public func runServer(_ services: [any Service], configuration: ServerConfiguration, logger: Logger) async throws {
    var group = ServiceGroupConfiguration(
        services: services.map { ServiceGroupConfiguration.ServiceConfiguration(service: $0) },
        gracefulShutdownSignals: [.sigterm, .sigint], cancellationSignals: [], logger: logger)
    group.maximumGracefulShutdownDuration = configuration.shutdownDeadline
    group.maximumCancellationDuration = .seconds(5)
    try await ServiceGroup(configuration: group).run()
}

/// Applies other processes' writes to the audience index as they commit.
struct FeedFollower: Service {
    let registry: RegistryService
    let interval: Duration
    let logger: Logger

    func run() async throws {
        let logger = logger
        await cancelWhenGracefulShutdown {
            await registry.followFeed(every: interval) { event in
                switch event {
                case .reloaded(let duration):
                    logger.notice(
                        "audience index reloaded from the tables: this process missed feed entries",
                        metadata: ["duration": "\(duration)"])
                case .failed(let error):
                    logger.error("reading the change feed failed", metadata: ["error": "\(error)"])
                }
            }
        }
    }
}

/// Saves the audience index every `interval` while it changes, and once more at shutdown, so
/// that the next start loads the checkpoint and replays only the feed after it.
struct CheckpointWriter: Service {
    let registry: RegistryService
    let interval: Duration
    let logger: Logger

    func run() async throws {
        let saved = await cancelWhenGracefulShutdown { () async -> Int64? in
            var saved: Int64? = nil
            while !Task.isCancelled {
                try? await Task.sleep(for: interval)
                guard !Task.isCancelled, registry.audience.position != saved else { continue }
                saved = await save() ?? saved
            }
            return saved
        }
        if registry.audience.position != saved ?? nil { _ = await save() }
    }

    private func save() async -> Int64? {
        let started = ContinuousClock.now
        do {
            guard let (bytes, position) = try await registry.saveCheckpoint() else { return nil }
            logger.info(
                "audience checkpoint saved",
                metadata: [
                    "bytes": "\(bytes)", "feed.position": "\(position)", "duration": "\(ContinuousClock.now - started)",
                ])
            return position
        } catch {
            logger.error("saving the audience checkpoint failed", metadata: ["error": "\(error)"])
            return nil
        }
    }
}
