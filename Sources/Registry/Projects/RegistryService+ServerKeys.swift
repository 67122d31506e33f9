import Foundation

/// Server keys: made with a name and scopes, listed without the key, revoked at once or after a
/// rotation's grace period, and checked on every request (through `ServerKeyCache`).
extension RegistryService {
    /// The longest a rotated key keeps working beside its replacement.
    public static let maximumGracePeriod: Duration = .seconds(7 * 86_400)
    /// The longest name a key may have, in characters.
    public static let maximumKeyNameLength = 100

    /// Adds a server key with every scope to a project; returns the new key (shown only now).
    public func addServerKey(toProject projectId: String, by actor: AuditActor = .commandLine) async throws
        -> (Project, serverKey: String)
    {
        let (project, _, key) = try await addServerKey(toProject: projectId, name: "", scopes: .all, by: actor)
        return (project, key)
    }

    /// Adds a server key with a name and scopes to a project; returns it as listed, and the key
    /// (shown only now). Audited as `key.created` (by the command line unless `actor` says).
    public func addServerKey(
        toProject projectId: String, name: String, scopes: KeyScopes, by actor: AuditActor = .commandLine
    ) async throws -> (Project, ServerKeyRecord, serverKey: String) {
        try Self.checkKey(name: name, scopes: scopes)
        let key = ServerKey.generate()
        let (project, record) = try await store.addServerKey(
            keyHash: ServerKey.hash(key), name: name, scopes: scopes.rawValue, toProject: projectId
        ) { project, record, _ in
            audit(.keyCreated, target: String(record.id), details: Self.keyDetails(record), by: actor, project: project)
        }
        return (project, record, key)
    }

    /// Revokes a server key by its value, at once. Audited as `key.revoked`.
    /// - Throws: `.serverKeyNotFound`; `.lastAdminKey` for the project's last admin key.
    public func revokeServerKey(_ key: String, by actor: AuditActor = .commandLine) async throws {
        let hash = ServerKey.hash(key)
        _ = try await store.revokeServerKey(.hash(hash), revokedAt: Date(), replacement: nil) { project, record, _ in
            audit(.keyRevoked, target: String(record.id), details: Self.keyDetails(record), by: actor, project: project)
        }
        serverKeys.forget(hash)
    }

    /// Revokes the project's key with this id, at once (`DELETE /api/keys/{id}`). Audited as
    /// `key.revoked`.
    /// - Throws: `.serverKeyNotFound`; `.lastAdminKey` for the project's last admin key.
    public func revokeServerKey(id: Int64, in project: Project, by actor: AuditActor = .commandLine) async throws
        -> ServerKeyRecord
    {
        let (revoked, _) = try await store.revokeServerKey(
            .id(id, projectRowID: project.rowID), revokedAt: Date(), replacement: nil
        ) { project, record, _ in
            audit(.keyRevoked, target: String(record.id), details: Self.keyDetails(record), by: actor, project: project)
        }
        serverKeys.forget(keyID: id)
        return revoked
    }

    /// What a key event's audit entry says of the key: its name and scopes, never its value.
    static func keyDetails(_ record: ServerKeyRecord) -> [String: String] {
        ["name": record.name, "scopes": record.scopes.names.joined(separator: " ")]
    }

    /// A new key with the same name and scopes as the key with this id, which keeps working for
    /// `gracePeriod` (at most ``maximumGracePeriod``), in one transaction.
    /// - Returns: the new key as listed, and its value (shown only now).
    public func rotateServerKey(
        id: Int64, in project: Project, gracePeriod: Duration, by actor: AuditActor = .commandLine
    ) async throws -> (ServerKeyRecord, serverKey: String) {
        guard gracePeriod >= .zero, gracePeriod <= Self.maximumGracePeriod else {
            throw RegistryError.invalidServerKey(
                "gracePeriod is 0s to \(Self.maximumGracePeriod.components.seconds)s (7 days)", field: "gracePeriod")
        }
        guard let old = try await store.serverKeys(in: project).first(where: { $0.id == id }) else {
            throw RegistryError.serverKeyNotFound
        }
        let key = ServerKey.generate()
        let (_, added) = try await store.revokeServerKey(
            .id(id, projectRowID: project.rowID), revokedAt: Date().addingTimeInterval(gracePeriod.seconds),
            replacement: NewServerKey(hash: ServerKey.hash(key), name: old.name, scopes: old.scopes.rawValue)
        ) { project, record, added in
            var details = Self.keyDetails(record)
            details["newKeyId"] = added.map { String($0.id) }
            details["gracePeriod"] = "\(gracePeriod.components.seconds)s"
            return audit(.keyRotated, target: String(record.id), details: details, by: actor, project: project)
        }
        serverKeys.forget(keyID: id)
        guard let added else { throw RegistryError.serverKeyNotFound }
        return (added, key)
    }

    /// Every key of the project, revoked ones included (never a key's value).
    public func serverKeys(in project: Project) async throws -> [ServerKeyRecord] {
        try await store.serverKeys(in: project)
    }

    /// The project a server key opens, or `nil` for an unknown or revoked key.
    public func project(authenticatedBy key: String) async throws -> Project? {
        try await grant(authenticatedBy: key)?.project
    }

    /// What a server key may do, or `nil` for an unknown or revoked key. Answers are cached for a
    /// second (see `ServerKeyCache`); the key's use is recorded on its first request of a minute.
    public func grant(authenticatedBy key: String, now: Date = Date()) async throws -> KeyGrant? {
        let hash = ServerKey.hash(key)
        let grant: KeyGrant?
        if let cached = serverKeys.lookUp(hash, now: now) {
            grant = cached
        } else {
            grant = try await store.serverKey(authenticatedBy: hash, now: now).map { project, record in
                KeyGrant(
                    project: project, keyID: record.id, keyName: record.name, scopes: record.scopes,
                    expiresAt: record.revokedAt)
            }
            serverKeys.store(grant, for: hash)
        }
        if let id = grant?.keyID, let minute = keyUses.isFirstUse(of: id, at: now) {
            // A lost write only leaves the last use a minute older: the request goes on.
            try? await store.recordKeyUse(ids: [id], at: minute)
        }
        return grant
    }

    /// The rules of a key's name and scopes.
    static func checkKey(name: String, scopes: KeyScopes) throws(RegistryError) {
        guard name.count <= maximumKeyNameLength,
            !name.unicodeScalars.contains(where: { $0.properties.generalCategory == .control })
        else {
            throw .invalidServerKey(
                "a key's name is at most \(maximumKeyNameLength) characters, without control characters", field: "name")
        }
        guard scopes.isValid else {
            throw .invalidServerKey("a key needs at least one scope: send, subscribe, read or admin", field: "scopes")
        }
    }
}
