import Hummingbird
import Registry
import Synchronization

/// The per-request context: Hummingbird's core storage plus the project the server key opened.
public struct RegistryRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// Set by `AuthMiddleware` on every authenticated route.
    var project: Project?
    /// What the request's key or access token may do; set with `project`.
    var grant: KeyGrant?
    /// What the access log line names, filled in by inner layers that the outer one cannot see
    /// (the context is a value: a copy changed inside the route does not come back out).
    let labels = RequestLabels()

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
    }

    /// Every typed response is encoded as `JSONResponse` encodes: sorted keys, RFC 3339 times,
    /// FCM's content type.
    public var responseEncoder: RegistryResponseEncoder { RegistryResponseEncoder() }

    /// The authenticated project; routes behind `AuthMiddleware` always have one.
    func requireProject() throws -> Project {
        guard let project else { throw ErrorEnvelope.unauthenticated }
        return project
    }
}

/// The matched route (a template such as `/iid/info/:token`, never a path with a token in it)
/// and the project, for the request's log line and metrics.
final class RequestLabels: Sendable {
    private let state = Mutex<(route: String?, project: String?)>((nil, nil))

    var route: String? {
        get { state.withLock { $0.route } }
        set { state.withLock { $0.route = newValue } }
    }

    var project: String? {
        get { state.withLock { $0.project } }
        set { state.withLock { $0.project = newValue } }
    }
}
