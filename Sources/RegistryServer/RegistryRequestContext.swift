import Hummingbird
import Registry

/// The per-request context: Hummingbird's core storage plus the project the server key opened.
public struct RegistryRequestContext: RequestContext {
    public var coreContext: CoreRequestContextStorage
    /// Set by `AuthMiddleware` on every authenticated route.
    var project: Project?

    public init(source: ApplicationRequestContextSource) {
        coreContext = .init(source: source)
    }

    /// The authenticated project; routes behind `AuthMiddleware` always have one.
    func requireProject() throws -> Project {
        guard let project else { throw APIError.native(.unauthorized, "unauthenticated", "no server key") }
        return project
    }
}
