/// Tokens: what the registry knows of each, and the app server's reports of dead ones.
extension RegistryService {
    public func token(_ token: String, in project: Project) async throws -> TokenInfo? {
        try checkToken(token)
        return try await store.token(token, in: project)
    }

    public func registerToken(_ token: String, in project: Project) async throws -> TokenInfo {
        try checkToken(token)
        return applied(try await store.registerToken(token, in: project))
    }

    /// Unregisters a dead token: it leaves every group and topic at once.
    public func unregisterToken(_ token: String, in project: Project) async throws -> TokenInfo? {
        try checkToken(token)
        return applied(try await store.unregisterToken(token, in: project))
    }
}
