import Conditions

/// The registry's operations, as every front end (HTTP, command line) calls them: input is
/// validated here, keys are issued and read here, and the store does the rest in one transaction.
public struct Registry: Sendable {
    public let store: any RegistryStore
    public let limits: Limits
    let keys: NotificationKeyCodec
    let serverKeys = ServerKeyCache()
    /// Accepted messages and who they reached (this service records; it does not deliver).
    public let messages: MessageLog

    /// Opens the registry over `store`, creating the notification-key secret on first use.
    /// - Parameter loadAudience: fill the audience index from the store (the server does; commands
    ///   that only look at a few rows need not spend the second it takes on a large registry).
    public init(store: any RegistryStore, limits: Limits = Limits(), loadAudience: Bool = true) async throws {
        self.store = store
        self.limits = limits
        messages = MessageLog(capacity: limits.messageLogSize)
        let secret = try await store.secret(named: "notificationKey", orCreate: NotificationKeyCodec.makeSecret)
        keys = NotificationKeyCodec(secret: secret)
        if loadAudience { try await store.loadAudience() }
    }

    // MARK: - Projects

    /// Creates a project with a first server key; returns both (the key is shown only now).
    public func createProject(projectId: String, senderId: String) async throws -> (Project, serverKey: String) {
        try Project.validate(projectId: projectId, senderId: senderId)
        let key = ServerKey.generate()
        let project = try await store.createProject(
            projectId: projectId, senderId: senderId, keyHash: ServerKey.hash(key))
        return (project, key)
    }

    /// Adds another server key to a project (for rotation); returns the new key.
    public func addServerKey(toProject projectId: String) async throws -> (Project, serverKey: String) {
        let key = ServerKey.generate()
        let project = try await store.addServerKey(keyHash: ServerKey.hash(key), toProject: projectId)
        return (project, key)
    }

    public func revokeServerKey(_ key: String) async throws {
        let hash = ServerKey.hash(key)
        try await store.revokeServerKey(keyHash: hash)
        serverKeys.forget(hash)
    }

    /// The project a server key opens, or `nil` for an unknown or revoked key.
    /// Answers are cached for a second (see `ServerKeyCache`).
    public func project(authenticatedBy key: String) async throws -> Project? {
        let hash = ServerKey.hash(key)
        if let cached = serverKeys.lookUp(hash) { return cached }
        let project = try await store.project(authenticatedBy: hash)
        serverKeys.store(project, for: hash)
        return project
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
