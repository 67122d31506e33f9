import AudienceEngine
import Foundation

/// A committed write's value and the change-feed entries it committed with it, which the registry
/// applies to its own audience index at once (read-your-writes); every other process reads them
/// from the feed.
public struct Committed<Value: Sendable>: Sendable {
    public var value: Value
    public var changes: [FeedEntry]

    public init(_ value: Value, changes: [FeedEntry]) {
        self.value = value
        self.changes = changes
    }
}

/// A whole backend: the registry's tables, the change feed over them, the message log, the
/// relay's outbox, the upstream messages on their way to XMPP sessions, and the sends' idempotency keys.
public typealias RegistryBackend =
    ArchiveStore & AuditStore & ChangeFeed & IdempotencyStore & MessageLogStore & OutboxStore & RegistryStore
    & SendBudgetStore & UpstreamStore & WebhookCopyStore & WebhookStore

/// Where the registry keeps projects, keys, groups, topics and tokens: the narrow interface a
/// backend implements, with ``ChangeFeed`` and ``MessageLogStore`` beside it.
///
/// Every method that writes is one transaction: it either does all it says or throws and changes
/// nothing. Rule checks that need the stored state (member limit, topics per token, unique names)
/// happen inside that transaction and throw `RegistryError`. Tokens passed in are already
/// well-formed and free of duplicates; names are already valid.
///
/// **Isolation.** Each write says what it needs beyond all-or-nothing. "Serialized per group"
/// (per token, per name) means that two such writes on the same group never interleave between
/// the read of a count and the write that depends on it, on one server or several. SQLite gets it
/// from its single writer; a backend with several writers from row locks taken in a fixed order
/// (project, then group or name, then tokens by id) or serializable transactions retried. A write
/// that changes whom a topic or `!` reaches records its feed entries in its own transaction, after
/// its row locks are taken, so two writes to the same token take their feed ids in commit order.
/// Writes that return ``Committed`` are those that can change the audience.
public protocol RegistryStore: RegistryWriting {
    /// Runs the cheapest statement the database answers (`SELECT 1`): whether it can be reached
    /// now, for readiness. Throws a `StoreConnectionFailure` when it cannot.
    func ping() async throws

    // MARK: Projects and keys

    /// Creates a project and its first key (every scope); `audit` says, from the key's row, the
    /// entry to insert in the same transaction.
    func createProject(projectId: String, senderId: String, keyHash: [UInt8], audit: KeyAudit?) async throws
        -> Project
    /// Adds a key with its name and scopes (a bit set, see `KeyScopes`); returns it as listed.
    /// `audit` says, from what was written, the audit entry to insert in the same transaction.
    func addServerKey(
        keyHash: [UInt8], name: String, scopes: Int, toProject projectId: String, audit: @escaping KeyAudit
    ) async throws -> (Project, ServerKeyRecord)
    /// Revokes the key with that hash (`.hash`) or that id in a project (`.id`) from `revokedAt` on
    /// (a time to come: a rotation's grace period), first adding `replacement` beside it, all in
    /// one transaction; returns the revoked key and the one added.
    /// - Throws: `RegistryError.serverKeyNotFound` when no key is active (or in a grace period)
    ///   there; a grace period under way ends at the earlier of its end and `revokedAt`; `.lastAdminKey` when, once done, no key of the project
    ///   with `scopes & 8` is left without a `revokedAt`.
    /// `audit` says, from what was written, the audit entry to insert in the same transaction.
    func revokeServerKey(
        _ key: ServerKeyMatch, revokedAt: Date, replacement: NewServerKey?, audit: @escaping KeyAudit
    ) async throws -> (revoked: ServerKeyRecord, added: ServerKeyRecord?)
    /// The key with that hash, active at `now` (never revoked, or revoked after `now`), and its project.
    func serverKey(authenticatedBy keyHash: [UInt8], now: Date) async throws -> (Project, ServerKeyRecord)?
    /// Every key of the project, revoked ones included, by id.
    func serverKeys(in project: Project) async throws -> [ServerKeyRecord]
    /// Records that the keys were used at `at` (a whole minute), where they have no later use recorded.
    func recordKeyUse(ids: [Int64], at: Date) async throws
    func projects() async throws -> [Project]
    /// Stores a new service account (its public key) for `project`.
    func addServiceAccount(_ account: ServiceAccount, to project: Project) async throws
    /// The active (not revoked) service account with that key id, and its project.
    func serviceAccount(keyID: String) async throws -> (ServiceAccount, Project)?
    /// The newest active service account with that `client_email`, and its project.
    func serviceAccount(clientEmail: String) async throws -> (ServiceAccount, Project)?
    /// The project's service accounts, revoked ones included.
    func serviceAccounts(in project: Project) async throws -> [ServiceAccount]
    /// - Throws: `RegistryError.serviceAccountNotFound` when no active account has that key id.
    func revokeServiceAccount(keyID: String) async throws
    /// Records an exchanged assertion (by its hash) until it expires, forgetting those expired
    /// before `now`; returns when it was first exchanged (`now` for a new one). One transaction,
    /// so that servers given the same assertion at once agree on its first use.
    func markAssertionUsed(hash: [UInt8], expiresAt: Date, now: Date) async throws -> Date
    /// The secret stored under `name`, created from `make()` the first time it is asked for.
    func secret(named name: String, orCreate make: @Sendable () -> [UInt8]) async throws -> [UInt8]

    // MARK: The mirror of Google's device groups

    /// The settings (Google's service account and upstream) `project mirror` forwards the
    /// project's device-group calls with; `nil` while the mirror is off.
    func mirrorSettings(of project: Project) async throws -> ChannelSettings?
    /// Turns the mirror on with `settings`, or off with `nil`, with `audit`'s entry in the same
    /// transaction.
    func setMirrorSettings(_ settings: ChannelSettings?, for project: Project, audit: AuditWrite?) async throws
    // MARK: Token policy and the expiry sweep

    /// The project's token policy (`TokenPolicy.standard` for a project never given one).
    func tokenPolicy(of project: Project) async throws -> TokenPolicy
    /// Stores the project's token policy, with `audit`'s entry in the same transaction, and clears
    /// the sweep's claim so that the next sweep tick runs a round under the new policy.
    func setTokenPolicy(_ policy: TokenPolicy, for project: Project, audit: AuditWrite?) async throws
    /// Claims a round of the expiry sweep for the project at `now`: one compare-and-set on the
    /// project's row, so of every server on the database only one claims it. False when the project
    /// has no expiry, or a round was claimed at or after `since`.
    func claimTokenSweep(of project: Project, at now: Date, unlessClaimedSince since: Date) async throws -> Bool
    /// Up to `limit` registered tokens last seen (`lastSeenAt`, else `updatedAt`) before `cutoff`,
    /// oldest first, read through the last-seen index.
    func registeredTokens(lastSeenBefore cutoff: Date, in project: Project, limit: Int) async throws -> [String]
    /// The ids of every registered token last seen (`lastSeenAt`, else `updatedAt`) before
    /// `cutoff`, in any order: the stale tokens a fan-out leaves out when the project's policy
    /// says not to send to them, read through the last-seen index.
    func registeredTokenIDs(lastSeenBefore cutoff: Date, in project: Project) async throws -> [UInt32]
    /// How many registered tokens were last seen (`lastSeenAt`, else `updatedAt`) on each UTC day,
    /// by days since 1970-01-01: one aggregate over the last-seen index.
    func registeredTokensBySeenDay(in project: Project) async throws -> [Int32: Int]

    /// Whether the group may have members at Google this database has not seen.
    func isGroupComplete(_ id: Int64, in project: Project) async throws -> Bool
    func groupCompleteness(in project: Project) async throws -> GroupCompleteness

    // MARK: Device groups

    func group(named name: String, in project: Project) async throws -> GroupRef?
    /// The group a notification key this database did not seal names: one of Google's, kept by
    /// `import-groups`, or one sealed by a keyring `import` brought, which `open` tries (it
    /// returns the keyring's id and the group id the key seals). `nil` when none does; an id no
    /// group has when the key's group was deleted, as the keys this database seals go on naming
    /// theirs.
    func groupID(
        forImportedKey key: String, in project: Project,
        opening open: @escaping @Sendable ([NotificationKeyring]) -> (keyring: Int64, group: Int64)?
    ) async throws -> Int64?
    /// A page of the groups whose names start with `prefix` (every group for `""`), by name.
    /// - Parameter incompleteOnly: only the groups first met through a mirrored add or remove.
    func groups(in project: Project, prefix: String, after: String?, limit: Int, incompleteOnly: Bool) async throws
        -> Page<GroupSummary>
    /// The group and a page of its members (token and when it joined), or `nil` when there is no such group.
    func groupMembers(named name: String, in project: Project, after: String?, limit: Int) async throws
        -> (GroupSummary, Page<Membership>)?

    // MARK: Topics

    func subscription(token: String, topic: String, in project: Project) async throws -> SubscriptionInfo?
    /// A page of the token's topics by name, or `nil` when the token is unknown or unregistered.
    func subscriptions(ofToken token: String, in project: Project, after: String?, limit: Int) async throws
        -> Page<SubscriptionInfo>?
    /// A page of the topics whose names start with `prefix` (every topic for `""`), by name.
    func topics(in project: Project, prefix: String, after: String?, limit: Int) async throws -> Page<TopicSummary>
    /// When each of the named topics was created; a name with no topic is left out.
    func topicCreationTimes(_ names: [String], in project: Project) async throws -> [String: Date]
    func topicSubscribers(named name: String, in project: Project, after: String?, limit: Int) async throws
        -> (TopicSummary, Page<Membership>)?

    // MARK: Tokens

    func token(_ token: String, in project: Project) async throws -> TokenInfo?
    /// A page of the project's tokens whose values start with `prefix` (every token for `""`),
    /// registered or not, by value, after the value `after`.
    func tokens(in project: Project, prefix: String, after: String?, limit: Int) async throws -> Page<TokenInfo>
    /// The groups (by name) a token belongs to.
    func groups(ofToken token: String, in project: Project) async throws -> [Membership]
    /// The values of the tokens with these ids, which are ascending, in the same order (ids of
    /// other projects are skipped).
    func tokenValues(ids: [UInt32], in project: Project) async throws -> [String]
    /// The ids of the registered ones among `tokens`, in one lookup (a multicast names up to 1,000).
    func tokenIDs(_ tokens: [String], in project: Project) async throws -> [String: UInt32]
    /// The token's id, registered or not: what was sent to a token stays its history after FCM
    /// pruned it.
    func tokenID(_ token: String, in project: Project) async throws -> UInt32?
    /// Those of `tokens` that `project` has never seen and another project has registered.
    func tokensOfOtherSenders(_ tokens: [String], notIn project: Project) async throws -> Set<String>
    /// The sorted token ids of a group, by id or by name; `nil` when there is no such group.
    func memberIDs(ofGroup id: Int64?, named name: String?, in project: Project) async throws -> [UInt32]?
}

/// The change feed: every committed write's effect on whom a topic or `!` reaches, which each
/// server's audience index follows. The table is the truth; ``wakeUps()`` is only a doorbell.
public protocol ChangeFeed: Sendable {
    /// The audience as the tables hold it, with the cursor it reflects (one consistent read).
    func loadAudience() async throws -> AudienceLoad
    /// Changes committed after `cursor`, in the order to apply them, at most `limit`, and the
    /// cursor after them. A change that commits late under an id lower than one already read is
    /// returned by a later read (see `FeedCursor`).
    func changes(after cursor: FeedCursor, limit: Int) async throws -> FeedRead
    /// The cursor after every change committed so far.
    func head() async throws -> FeedCursor
    /// How many committed changes a reader at `cursor` has not read yet (the follower's lag).
    func unread(after cursor: FeedCursor) async throws -> Int64
    /// Whether ids are handed out in commit order and without gaps, as by one writer at a time:
    /// then a process's own write right after its cursor may move the cursor past it (see
    /// `AudienceIndex.applyOwn`). A backend with concurrent writers says no.
    var idsFollowCommitOrder: Bool { get }
    /// A fingerprint of the entry at `cursor`'s watermark, `nil` when there is none (an empty or
    /// pruned feed there): it tells one copy of a database from another that went its own way.
    func fingerprint(at cursor: FeedCursor) async throws -> [UInt8]?
    /// Rings when there may be something new to read: after this process's commits, and when the
    /// backend notices another's. A ring may be missed or spurious: readers poll as well.
    func wakeUps() -> AsyncStream<Void>
}

/// The emulator's message log: accepted messages and whom they reached, kept per project.
public protocol MessageLogStore: Sendable {
    /// Appends an accepted message, then drops the project's oldest entries until the log holds
    /// at most `entries` entries and `bytes` bytes.
    func appendMessage(_ message: AcceptedMessage, body: String, entries: Int, bytes: Int) async throws
    /// A page of the project's logged messages, newest first, older than the log position
    /// `before`; at most `limit` entries and about `bytes` bytes of bodies (always at least one).
    func messages(_ filter: MessageFilter, in project: Project, before: Int64?, limit: Int, bytes: Int) async throws
        -> Page<LoggedMessage>
    /// Entries and bytes of each project's message log, by project id.
    func messageLogUsage() async throws -> [String: (entries: Int, bytes: Int)]
    /// The logged message with this id, if the log still holds it.
    func message(_ id: String, in project: Project) async throws -> LoggedMessage?
    /// The project's `minuteStat` rows from the minute `from` (epoch milliseconds) on, oldest first.
    /// Appending a message adds it to its minute's `accepted` (`MinuteStats.accepted`) and purges at
    /// most `MinuteStats.purgeLimit` rows older than `MinuteStats.expiry`, in the same transaction.
    func minuteStats(of project: Int64, from: Int64) async throws -> [MinuteStats]

}

/// The audit entry of a key event, from the project's row id, the key it names and the key it
/// added (a rotation's); written in the event's transaction.
public typealias KeyAudit =
    @Sendable (_ project: Int64, _ key: ServerKeyRecord, _ added: ServerKeyRecord?) -> AuditWrite?

/// What a re-key moved: the topics and groups `to` is in now.
public struct Rekeyed: Sendable, Equatable, Codable {
    public var from: String
    public var to: String
    public var topics: [String]
    public var groups: [String]

    public init(from: String, to: String, topics: [String], groups: [String]) {
        self.from = from
        self.to = to
        self.topics = topics
        self.groups = groups
    }
}

/// What `setTopics` changed.
public struct TopicChanges: Sendable, Equatable, Codable {
    public var added: [String]
    public var removed: [String]

    public init(added: [String], removed: [String]) {
        self.added = added
        self.removed = removed
    }
}

extension RegistryStore {
    /// Turns the mirror on or off with no audit entry: copies and tests.
    public func setMirrorSettings(_ settings: ChannelSettings?, for project: Project) async throws {
        try await setMirrorSettings(settings, for: project, audit: nil)
    }
}
