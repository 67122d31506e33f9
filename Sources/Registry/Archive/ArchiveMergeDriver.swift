/// The statements an import runs, as one store writes them, inside the transaction of one batch.
///
/// ``ArchiveMerge`` holds every rule (what matches what, what is refused and in which words, what
/// is counted, what goes to the change feed); a driver only reads and writes rows. Row ids are
/// the store's own; times are milliseconds since the epoch. Statements that touch many tokens
/// take arrays, so that a store with round trips pays one per batch, not one per row.
public protocol ArchiveMergeDriver: RegistryRowStatements {
    // MARK: - Projects and credentials

    /// The project's row id and sender id, or `nil` when the database does not have it.
    func project(_ projectId: String) async throws -> (rowID: Int64, senderId: String)?
    /// The id of the project that has this sender id, if any.
    func project(sendingAs senderId: String) async throws -> String?
    /// Inserts the project's row (not its credentials) and returns its row id.
    func insertProject(_ record: ProjectArchive) async throws -> Int64

    /// The server key with this SHA-256, if any project has it.
    func serverKey(_ hash: [UInt8]) async throws -> CredentialRow?
    func insertServerKey(
        _ hash: [UInt8], createdAt: Int64, revokedAt: Int64?, name: String, scopes: Int, of project: Int64
    ) async throws
    func revokeServerKey(_ hash: [UInt8], at revokedAt: Int64) async throws

    /// The service account with this key id, if any project has it.
    func serviceAccount(_ keyId: String) async throws -> CredentialRow?
    func insertServiceAccount(_ account: ServiceAccountArchive, revokedAt: Int64?, of project: Int64) async throws
    func revokeServiceAccount(_ keyId: String, at revokedAt: Int64) async throws

    /// Inserts a keyring unless the project has one with this fingerprint.
    /// - Returns: whether it inserted one.
    func insertKeyring(
        _ fingerprint: String, secret: [UInt8], sealedFor: Int64, of project: Int64, at importedAt: Int64
    ) async throws -> Bool
    func keyringCount(of project: Int64) async throws -> Int
    /// The row id of the project's keyring with this fingerprint.
    func keyring(_ fingerprint: String, of project: Int64) async throws -> Int64?

    // MARK: - Topics and tokens

    /// The topic's row id, inserted if missing; held until the transaction ends where the store
    /// lets another writer remove an empty topic meanwhile.
    func topic(_ name: String, in project: Int64, createdAt: Int64) async throws -> (id: Int64, created: Bool)
    /// Inserts the tokens the project does not have yet.
    /// - Returns: the rows it inserted, by token.
    func insertTokens(_ tokens: [NewToken], in project: Int64) async throws -> [String: TokenRowState]
    /// The project's rows of these tokens, by token.
    func tokens(_ values: [String], in project: Int64) async throws -> [String: TokenRowState]
    /// Marks an unregistered token registered again.
    func reregister(_ token: Int64, at updatedAt: Int64) async throws
    /// Inserts the subscriptions not there yet.
    /// - Returns: those it inserted, as (topic, token).
    func subscribe(_ subscriptions: [NewSubscription]) async throws -> [(topic: Int64, token: Int64)]
    /// Those of the tokens that have more than `limit` topics.
    func tokens(_ ids: [Int64], withMoreTopicsThan limit: Int) async throws -> [Int64]

    // MARK: - Groups and notification keys

    /// The row id of the project's group with this name.
    func group(_ name: String, in project: Int64) async throws -> Int64?
    func insertGroup(_ name: String, createdAt: Int64, complete: Bool, in project: Int64) async throws -> Int64
    func markIncomplete(_ group: Int64) async throws
    /// Adds the members the group does not have yet.
    /// - Returns: how many it added.
    func addMembers(_ members: [(token: Int64, since: Int64)], to group: Int64) async throws -> Int
    /// Makes a key another registry sealed for its group `sourceGroup` name `group` (replacing what it named).
    func mapKeyring(_ keyring: Int64, sourceGroup: Int64, to group: Int64) async throws
    /// Keeps a notification key issued elsewhere as a name of `group`, when the key names no
    /// group of the project yet.
    /// - Returns: whether it did.
    func keepImportedKey(_ key: String, naming group: Int64, in project: Int64, at importedAt: Int64) async throws
        -> Bool
    /// The group a kept notification key names, if it names one.
    func groupNamed(byImportedKey key: String, in project: Int64) async throws -> (id: Int64, name: String)?

    // MARK: - Errors

    /// The database's own words when `error` is a constraint the batch broke (a unique key,
    /// a foreign key), else `nil`.
    func conflict(in error: any Error) -> String?
}

/// Who has a credential here, and whether it is revoked.
public struct CredentialRow: Sendable, Hashable {
    public var project: Int64
    public var revokedAt: Int64?

    public init(project: Int64, revokedAt: Int64?) {
        self.project = project
        self.revokedAt = revokedAt
    }
}

/// A token's row as the merge needs it.
public struct TokenRowState: Sendable, Hashable {
    public var id: Int64
    public var state: TokenState
    public var updatedAt: Int64

    public init(id: Int64, state: TokenState, updatedAt: Int64) {
        self.id = id
        self.state = state
        self.updatedAt = updatedAt
    }
}

/// A token row to insert.
public struct NewToken: Sendable, Hashable {
    public var value: String
    public var state: TokenState
    public var createdAt: Int64
    public var updatedAt: Int64
    public var lastSeenAt: Int64?
    public var attributes = TokenAttributes()
}

/// A subscription row to insert.
public struct NewSubscription: Sendable, Hashable {
    public var topic: Int64
    public var token: Int64
    public var since: Int64
}
