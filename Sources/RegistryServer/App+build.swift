import Hummingbird
import Logging
import Registry

/// Where the server listens.
public struct ServerAddress: Sendable {
    public var host: String
    public var port: Int

    public init(host: String = "127.0.0.1", port: Int = 8080) {
        self.host = host
        self.port = port
    }
}

/// The whole HTTP application over `registry`.
public func buildApplication(registry: Registry, address: ServerAddress, logger: Logger) -> some ApplicationProtocol {
    Application(
        router: buildRouter(registry: registry),
        configuration: .init(address: .hostname(address.host, port: address.port), serverName: "fcm-registry"),
        logger: logger)
}

/// Every route, behind the error envelope; every route but `/health` behind the server key.
public func buildRouter(registry: Registry) -> Router<RegistryRequestContext> {
    let router = Router(context: RegistryRequestContext.self)
    router.add(middleware: ErrorEnvelopeMiddleware())
    router.get("/health") { _, _ in try JSONResponse.make(["status": "ok"]) }

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
    routes.addMethodNotAllowed(to: router)
    return router
}
