import Conditions

/// The registry's operations, as every front end (HTTP, command line) calls them: input is
/// validated here, keys are issued and read here, and the store does the rest in one transaction.
public struct Registry: Sendable {
    public let store: any RegistryStore
    public let limits: Limits
    let keys: NotificationKeyCodec

    /// Opens the registry over `store`, creating the notification-key secret on first use.
    public init(store: any RegistryStore, limits: Limits = Limits()) async throws {
        self.store = store
        self.limits = limits
        let secret = try await store.secret(named: "notificationKey", orCreate: NotificationKeyCodec.makeSecret)
        keys = NotificationKeyCodec(secret: secret)
    }

    // MARK: - Projects

    /// Creates a project with a first server key; returns both (the key is shown only now).
    public func createProject(projectId: String, senderId: String) async throws -> (Project, serverKey: String) {
        try Project.validate(projectId: projectId, senderId: senderId)
        let key = ServerKey.generate()
        let project = try await store.createProject(projectId: projectId, senderId: senderId, keyHash: ServerKey.hash(key))
        return (project, key)
    }

    /// Adds another server key to a project (for rotation); returns the new key.
    public func addServerKey(toProject projectId: String) async throws -> (Project, serverKey: String) {
        let key = ServerKey.generate()
        let project = try await store.addServerKey(keyHash: ServerKey.hash(key), toProject: projectId)
        return (project, key)
    }

    public func revokeServerKey(_ key: String) async throws {
        try await store.revokeServerKey(keyHash: ServerKey.hash(key))
    }

    /// The project a server key opens, or `nil` for an unknown or revoked key.
    public func project(authenticatedBy key: String) async throws -> Project? {
        try await store.project(authenticatedBy: ServerKey.hash(key))
    }

    // MARK: - Shared checks

    /// Well-formed tokens in first-seen order without repeats; malformed ones are dropped, as FCM does.
    func usableTokens(_ tokens: [String]) -> [String] {
        var seen = Set<String>()
        return tokens.filter { RegistrationToken.isWellFormed($0) && seen.insert($0).inserted }
    }

    func checkTopicName(_ topic: String) throws(RegistryError) {
        guard TopicName.isValid(topic) else { throw .invalidTopicName }
    }

    func checkToken(_ token: String) throws(RegistryError) {
        guard RegistrationToken.isWellFormed(token) else { throw .malformedToken }
    }

    func pageSize(_ requested: Int?) -> Int {
        guard let requested, requested > 0 else { return limits.defaultPageSize }
        return min(requested, limits.maximumPageSize)
    }
}
