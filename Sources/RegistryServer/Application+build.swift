import ConnectionGuards
import Hummingbird
import HummingbirdCore
import HummingbirdHTTP2
import Logging
import NIOCore
import NIOSSL
import Prometheus
import Registry

/// The plain HTTP listener over `registry`: HTTP/1.1 with the connection guards (header, body and
/// idle timeouts, early answers) and a connection limit near which silent connections give way.
///
/// - Parameters:
///   - metrics: the registry `GET /metrics` shows; the process's swift-metrics factory should
///     write into it (`serve` bootstraps one).
///   - sessions: the XMPP server's sessions, which the native upstream and drain routes and
///     `GET /metrics` reach; the composition root hands the hub over, so this target imports no
///     other front end.
public func buildApplication(
    registry: RegistryService, settings: HTTPSettings, logger: Logger,
    metrics: PrometheusCollectorRegistry = PrometheusCollectorRegistry(), sessions: any AppServerSessions
) -> Application<RouterResponder<RegistryRequestContext>> {
    let silent = SilentConnections(
        spacing: SilentConnections.spacing(
            headerTimeout: settings.headerTimeout, maximumConnections: settings.maximumConnections),
        logger: logger)
    let slowLog = LogThrottle()
    let guardLogger = logger
    return Application(
        router: buildRouter(
            registry: registry, metrics: metrics, sessions: sessions, readyMaximumLag: settings.readyMaximumLag),
        server: .http1(
            configuration: .init(
                additionalChannelHandlers: [
                    ConnectionGuard(
                        headerTimeout: settings.headerTimeout, bodyTimeout: settings.bodyTimeout, slowLog: slowLog,
                        silent: silent, logger: guardLogger)
                ],
                idleTimeout: TimeAmount(settings.idleTimeout))),
        configuration: .init(
            address: .hostname(settings.host, port: settings.port), serverName: "fcm-registry",
            availableConnectionsDelegate: ConnectionLimit(
                settings.maximumConnections, makingRoomIn: silent, listener: "http", logger: logger)),
        logger: logger)
}

/// The TLS listener over `registry`: HTTP/2 and HTTP/1.1 by ALPN, with the same guards per request
/// or stream, and a deadline from the connection's first byte to its first request head (TLS
/// handshake and HTTP/2 preface included) until which the connection may give way near the limit.
public func buildTLSApplication(
    registry: RegistryService, settings: HTTPSettings, tls: TLSConfiguration, logger: Logger,
    metrics: PrometheusCollectorRegistry, sessions: any AppServerSessions
) throws -> Application<RouterResponder<RegistryRequestContext>> {
    let silent = SilentConnections(
        spacing: SilentConnections.spacing(
            headerTimeout: settings.headerTimeout, maximumConnections: settings.maximumConnections),
        logger: logger)
    let slowLog = LogThrottle()
    let guardLogger = logger
    let (headerTimeout, bodyTimeout) = (settings.headerTimeout, settings.bodyTimeout)
    let http2 = HTTP2UpgradeChannel.Configuration(
        idleTimeout: settings.idleTimeout,
        streamConfiguration: .init(
            additionalChannelHandlers: [
                ConnectionGuard(
                    headerTimeout: headerTimeout, bodyTimeout: bodyTimeout, slowLog: slowLog,
                    announcesFirstRequest: true, logger: guardLogger)
            ],
            idleTimeout: TimeAmount(settings.idleTimeout)))
    let server = HTTPServerBuilder { responder in
        GuardedChildChannel(
            base: try HTTP2UpgradeChannel(tlsConfiguration: tls, configuration: http2, responder: responder)
        ) {
            FirstRequestDeadline(headerTimeout: headerTimeout, slowLog: slowLog, silent: silent, logger: guardLogger)
        }
    }
    return Application(
        router: buildRouter(
            registry: registry, metrics: metrics, sessions: sessions, readyMaximumLag: settings.readyMaximumLag),
        server: server,
        configuration: .init(
            address: .hostname(settings.host, port: settings.port), serverName: "fcm-registry",
            availableConnectionsDelegate: ConnectionLimit(
                settings.maximumConnections, makingRoomIn: silent, listener: "https", logger: logger)),
        logger: logger)
}

/// Every route, behind the access log and the error envelope; every route but `/health`,
/// `/metrics`, `/openapi.json`, `/token` and the console's files behind the server key.
public func buildRouter(
    registry: RegistryService, metrics: PrometheusCollectorRegistry, sessions: any AppServerSessions,
    readyMaximumLag: Duration = .seconds(10)
) -> Router<RegistryRequestContext> {
    routing(registry: registry, metrics: metrics, sessions: sessions, readyMaximumLag: readyMaximumLag).router
}

/// The router, and every (path, method) it serves: what `/openapi.json` describes, as a test checks.
func routing(
    registry: RegistryService, metrics: PrometheusCollectorRegistry, sessions: any AppServerSessions,
    readyMaximumLag: Duration = .seconds(10)
) -> (
    router: Router<RegistryRequestContext>, routes: [(path: String, method: HTTPRequest.Method)]
) {
    let router = Router(context: RegistryRequestContext.self)
    let serverMetrics = ServerMetrics(registry: metrics)
    router.add(middleware: AccessLogMiddleware(metrics: serverMetrics))
    router.add(middleware: ErrorEnvelopeMiddleware())
    let open = RouteRecorder(router.group())
    open.on("/health", .get) { _, _ in Health(status: "ok") }
    let readiness = ReadinessProbe(registry: registry, maximumLag: readyMaximumLag)
    open.on("/readyz", .get) { _, _ in await readiness.response() }
    open.on("/openapi.json", .get) { _, _ in OpenAPIDocument.response }
    open.on("/metrics", .get) { _, _ in
        try await MetricsEndpoint.response(registry: registry, metrics: serverMetrics, sessions: sessions)
    }
    let oauth = OAuthController(registry: registry)
    oauth.addOpenRoutes(to: open)
    // The console's files: static, and the API it calls asks for the key.
    ConsoleFiles.addRoutes(to: open)
    open.addMethodNotAllowed(to: router)

    let routes = RouteRecorder(
        router.group().add(middleware: AuthMiddleware(registry: registry)), checksScopes: true)
    // FCM's own APIs, byte for byte.
    DeviceGroupController(registry: registry).addRoutes(to: routes)
    InstanceIDController(registry: registry).addRoutes(to: routes)
    TopicSubscriptionController(registry: registry).addRoutes(to: routes)
    LegacySendController(registry: registry).addRoutes(to: routes)
    V1SendController(registry: registry).addRoutes(to: routes)
    oauth.addRoutes(to: routes)
    // The native API under /api.
    TokenController(registry: registry).addRoutes(to: routes)
    AudienceController(registry: registry).addRoutes(to: routes)
    InspectionController(registry: registry).addRoutes(to: routes)
    MessageController(registry: registry).addRoutes(to: routes)
    DeliveryController(registry: registry).addRoutes(to: routes)
    StatsController(registry: registry).addRoutes(to: routes)
    XMPPController(registry: registry, hub: sessions).addRoutes(to: routes)
    FaultController(registry: registry).addRoutes(to: routes)
    WebhookController(registry: registry).addRoutes(to: routes)
    AuditController(registry: registry).addRoutes(to: routes)
    KeyController(registry: registry).addRoutes(to: routes)
    routes.addMethodNotAllowed(to: router)
    return (router, open.recorded + routes.recorded)
}

/// `GET /health`: liveness, the process answers. Readiness is `GET /readyz` (`ReadinessProbe`).
struct Health: ResponseEncodable {
    var status: String
}
