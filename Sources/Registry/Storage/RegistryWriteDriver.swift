import AudienceEngine

/// Statements that the registry's writes and the import's merge (`ArchiveMergeDriver`) both run,
/// written once per store.
public protocol RegistryRowStatements {
    /// How many members the group has.
    func memberCount(of group: Int64) async throws -> Int
    /// Deletes the group's row (its members and notification keys with it).
    func deleteGroup(_ group: Int64) async throws
}

/// A token's row as a write needs it.
public struct WriteTokenRow: Sendable, Hashable {
    public var id: Int64
    public var state: TokenState
    /// Whether this write inserted it: a new token has no groups or topics yet.
    public var isNew: Bool

    public init(id: Int64, state: TokenState, isNew: Bool) {
        self.id = id
        self.state = state
        self.isNew = isNew
    }
}

/// The statements the registry's token, topic and group writes run, as one store writes them,
/// inside the transaction of one write.
///
/// `RegistryWriting`'s extensions hold every rule (the topics-per-token limit, registering unknown
/// tokens, dropping unregistered ones, removing what a removal empties) and place every change-feed
/// entry; a driver only reads and writes rows. Rows read to be written are held until the
/// transaction ends where the store has row locks, in the order the rules ask for them: tokens
/// (sorted), then topics (by name), then groups (by id). Statements over many tokens take arrays,
/// so that a store with round trips pays one per batch, not one per token. Row ids are the store's
/// own; times are milliseconds since the epoch.
public protocol RegistryWriteDriver: RegistryRowStatements {
    // MARK: - Tokens

    /// The token's row, held; `nil` when the project has never seen it.
    func token(_ value: String, in project: Int64) async throws -> WriteTokenRow?
    /// The rows of the tokens the project knows, held in sorted order, by token.
    func tokens(_ values: [String], in project: Int64) async throws -> [String: WriteTokenRow]
    /// The token's row, held, inserted as registered (and seen now) first when the project has
    /// never seen it.
    func tokenRegistering(_ value: String, in project: Int64, at now: Int64) async throws -> WriteTokenRow
    /// The tokens' rows (distinct values), held in sorted order, inserted as registered first
    /// where the project has never seen them, by token.
    func tokensRegistering(_ values: [String], in project: Int64, at now: Int64) async throws
        -> [String: WriteTokenRow]
    /// Sets the token's state and its `updatedAt`.
    func setState(_ state: TokenState, ofToken token: Int64, at now: Int64) async throws
    /// Applies each change to its token's attributes (a `.keep` field untouched, `.clear` to
    /// `NULL`) and sets its `lastSeenAt` (`seenAt`), in order.
    func updateAttributes(_ changes: [(token: Int64, change: TokenAttributeChange, seenAt: Int64)]) async throws
    /// Sets the tokens' `lastSeenAt`: a registration call named them (tokens inserted by this
    /// write have it already).
    func markSeen(_ tokens: [Int64], at now: Int64) async throws
    /// The token as it is listed, if the project has it.
    func tokenInfo(_ value: String, in project: Int64) async throws -> TokenInfo?
    /// The tokens the project has, as they are listed, by token.
    func tokenInfos(_ values: [String], in project: Int64) async throws -> [String: TokenInfo]
    /// A re-key's two rows, held in sorted order: the source's (`nil` when the project has never
    /// seen it) and the target's, inserted as registered first when new.
    func rekeyRows(from: String, to: String, in project: Int64, at now: Int64) async throws
        -> (from: WriteTokenRow?, to: WriteTokenRow)
    /// Inserts the audit entry, if any, and sweeps a few expired ones.
    func insertAudit(_ audit: AuditWrite?) async throws
    /// Queues `batch`'s events (the expiry sweep's `token.unregistered`) for the project's enabled
    /// webhooks, as a recorded outbox page queues its own.
    func queueWebhookEvents(_ batch: WebhookEventBatch, project: Int64) async throws

    // MARK: - Topics

    /// The topic's row id, if the project has the topic.
    func topicID(_ name: String, in project: Int64) async throws -> Int64?
    /// The topic's row id, inserting the topic first when it is missing, held so that no other
    /// write removes it as empty meanwhile; `created` when this write inserted it.
    func topicCreating(_ name: String, in project: Int64, at now: Int64) async throws -> (id: Int64, created: Bool)
    /// The token's topics, by name.
    func topics(ofToken token: Int64) async throws -> [(id: Int64, name: String)]
    /// Removes every subscription of the token; returns the topics it left, by name.
    func leaveTopics(_ token: Int64) async throws -> [(id: Int64, name: String)]
    /// Subscribes the token to the topic unless it is; returns whether it subscribed it.
    func joinTopic(_ topic: Int64, token: Int64, at now: Int64) async throws -> Bool
    /// Removes every subscription of the token.
    func deleteSubscriptions(ofToken token: Int64) async throws
    /// Those of the tokens subscribed to the topic.
    func subscribed(_ tokens: [Int64], to topic: Int64) async throws -> Set<Int64>
    /// How many topics each of the tokens has (a token with none may be left out).
    func topicCounts(of tokens: [Int64]) async throws -> [Int64: Int]
    /// Subscribes the tokens, none of them subscribed yet, to the topic.
    func insertSubscriptions(_ tokens: [Int64], to topic: Int64, at now: Int64) async throws
    /// Removes the tokens' subscriptions to the topic; returns the tokens that had one.
    func deleteSubscriptions(_ tokens: [Int64], from topic: Int64) async throws -> [Int64]
    /// Removes the topic when it has no subscriber, once no other write holds it.
    func deleteTopicIfEmpty(_ topic: Int64) async throws
    /// Removes a topic this write created and left without subscribers.
    func deleteTopic(_ topic: Int64) async throws

    // MARK: - Groups

    /// Inserts the project's group and returns its row id.
    /// - Throws: `RegistryError.groupNameTaken` when the project has a group by that name.
    func insertGroup(_ name: String, in project: Int64, at now: Int64) async throws -> Int64
    /// The name of the project's group with this id, its row held; `nil` when the project has none.
    func groupName(_ group: Int64, in project: Int64) async throws -> String?
    /// The group's members.
    func members(of group: Int64) async throws -> Set<Int64>
    /// Adds the tokens, none of them a member yet, to the group.
    func insertMembers(_ tokens: [Int64], into group: Int64, at now: Int64) async throws
    /// Removes the tokens from the group (those not in it are no matter).
    func deleteMembers(_ tokens: [Int64], from group: Int64) async throws
    /// Adds the token to the group unless it is a member.
    func joinGroup(_ group: Int64, token: Int64, at now: Int64) async throws
    /// The names of the token's groups, in order.
    func groupNames(ofToken token: Int64) async throws -> [String]
    /// Removes the token from every group, their rows held in id order first; returns the groups.
    func leaveGroups(_ token: Int64) async throws -> [Int64]
}

/// A store whose token, topic and group writes run the rules written once in `Registry` over its
/// statements (`RegistryWriteDriver`).
public protocol RegistryWriting: Sendable {
    associatedtype WriteDriver: RegistryWriteDriver
    /// Runs `body` over this store's statements as one all-or-nothing write; what it records in the
    /// log goes to the change feed in the same transaction, after the write's row locks, and comes
    /// back with its value.
    func writing<Value: Sendable>(_ body: @escaping @Sendable (WriteDriver, ChangeLog) async throws -> Value)
        async throws -> Committed<Value>
}
