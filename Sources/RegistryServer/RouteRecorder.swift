import Hummingbird
import Registry

/// Adds routes to a group and remembers which methods each path takes, so that a known path
/// called with another method answers 405 with an `Allow` header instead of 404.
final class RouteRecorder {
    private let group: RouterGroup<RegistryRequestContext>
    private var methods: [String: [HTTPRequest.Method]] = [:]
    private var order: [String] = []

    /// Whether the routes are behind `AuthMiddleware`: then each checks its key's scopes against
    /// `RouteScopes` before it runs.
    private let checksScopes: Bool

    init(_ group: RouterGroup<RegistryRequestContext>, checksScopes: Bool = false) {
        self.group = group
        self.checksScopes = checksScopes
    }

    /// Every (path, method) recorded, in the order added: what the OpenAPI document must describe.
    private(set) var recorded: [(path: String, method: HTTPRequest.Method)] = []

    func on<Output: ResponseGenerator>(
        _ path: String, _ method: HTTPRequest.Method,
        use handler: @escaping @Sendable (Request, RegistryRequestContext) async throws -> Output
    ) {
        let scope: KeyScope? = checksScopes ? RouteScopes.required(method, path) : nil
        group.on(RouterPath(path), method: method) { request, context in
            context.labels.route = path
            if let scope, context.grant?.scopes.allows(scope) != true {
                throw RouteScopes.refusal(APIFamily(path: request.uri.path), needs: scope)
            }
            return try await handler(request, context)
        }
        if methods[path] == nil { order.append(path) }
        methods[path, default: []].append(method)
        recorded.append((path, method))
    }

    /// Answers 405 on every recorded path for the methods it does not take.
    func addMethodNotAllowed(to router: Router<RegistryRequestContext>) {
        let all: [HTTPRequest.Method] = [.get, .post, .put, .delete, .patch, .head, .options]
        for path in order {
            let allowed = methods[path] ?? []
            for method in all where !allowed.contains(method) {
                router.on(RouterPath(path), method: method) { _, context -> Response in
                    context.labels.route = path
                    throw MethodNotAllowed(allowed: allowed)
                }
            }
        }
    }
}
