import Audience
import Foundation

/// Where the registry keeps its state: the narrow interface a backend implements.
///
/// Every method that writes is one transaction: it either does all it says or throws and changes
/// nothing. Rule checks that need the stored state (member limit, topics per token, unique names)
/// happen inside that transaction and throw `RegistryError`. Tokens passed in are already
/// well-formed and free of duplicates; names are already valid.
public protocol RegistryStore: Sendable {
    // MARK: Projects and keys

    func createProject(projectId: String, senderId: String, keyHash: [UInt8]) async throws -> Project
    func addServerKey(keyHash: [UInt8], toProject projectId: String) async throws -> Project
    /// - Throws: `RegistryError.serverKeyNotFound` when no active key has that hash.
    func revokeServerKey(keyHash: [UInt8]) async throws
    /// The project an active (not revoked) key belongs to.
    func project(authenticatedBy keyHash: [UInt8]) async throws -> Project?
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

    // MARK: Device groups

    /// Creates a group of the registered ones among `tokens` (unknown tokens are registered; unregistered ones dropped).
    func createGroup(named name: String, tokens: [String], memberLimit: Int, in project: Project) async throws
        -> GroupRef
    func addMembers(_ tokens: [String], toGroup id: Int64, expectedName: String?, memberLimit: Int, in project: Project)
        async throws -> GroupRef
    /// Removes members; a group left empty is deleted (`memberCount` 0).
    func removeMembers(_ tokens: [String], fromGroup id: Int64, expectedName: String?, in project: Project)
        async throws -> GroupRef
    func group(named name: String, in project: Project) async throws -> GroupRef?
    func groups(in project: Project, after: String?, limit: Int) async throws -> Page<GroupSummary>
    /// The group and a page of its members (token and when it joined), or `nil` when there is no such group.
    func groupMembers(named name: String, in project: Project, after: String?, limit: Int) async throws
        -> (GroupSummary, Page<Membership>)?

    // MARK: Topics

    /// One outcome per token, in order: `.ok`, `.notFound` (unregistered) or `.tooManyTopics`.
    func subscribe(_ tokens: [String], to topic: String, topicLimit: Int, in project: Project) async throws
        -> [BatchOutcome]
    /// One outcome per token, in order: `.ok` (also when it was not subscribed) or `.notFound` (unregistered).
    func unsubscribe(_ tokens: [String], from topic: String, in project: Project) async throws -> [BatchOutcome]
    /// Subscribes one token.
    /// - Throws: `.subscriptionExists`, `.tokenNotFound` (unregistered), `.tooManyTopics`.
    func createSubscription(token: String, topic: String, topicLimit: Int, in project: Project) async throws
        -> SubscriptionInfo
    /// Whether there was a subscription to delete.
    func deleteSubscription(token: String, topic: String, in project: Project) async throws -> Bool
    func subscription(token: String, topic: String, in project: Project) async throws -> SubscriptionInfo?
    /// A page of the token's topics by name, or `nil` when the token is unknown or unregistered.
    func subscriptions(ofToken token: String, in project: Project, after: String?, limit: Int) async throws
        -> Page<SubscriptionInfo>?
    /// Makes `topics` (distinct, valid) exactly the token's topics, registering an unknown token.
    /// - Throws: `.tokenNotFound` (unregistered), `.tooManyTopics`.
    func setTopics(_ topics: [String], ofToken token: String, topicLimit: Int, in project: Project) async throws
        -> (added: [String], removed: [String])
    func topics(in project: Project, after: String?, limit: Int) async throws -> Page<TopicSummary>
    func topicSubscribers(named name: String, in project: Project, after: String?, limit: Int) async throws
        -> (TopicSummary, Page<Membership>)?

    // MARK: Audiences and the change feed

    /// The audience as the tables hold it, with the feed position it reflects (one consistent read).
    func loadAudience() async throws -> AudienceLoad
    /// Committed feed entries after `position`, oldest first, at most `limit`.
    func feed(after position: Int64, limit: Int) async throws -> FeedRead
    /// The position of the newest committed entry.
    func feedHead() async throws -> Int64
    /// Makes `listener` hear of every commit of this store's writes before the writers resume,
    /// together with whatever other processes committed before it.
    func attach(_ listener: any FeedListener)
    /// The values of the tokens with these ids, which are ascending, in the same order (ids of
    /// other projects are skipped).
    func tokenValues(ids: [UInt32], in project: Project) async throws -> [String]
    /// The id of a registered token, or `nil`.
    func tokenID(_ token: String, in project: Project) async throws -> UInt32?
    /// The sorted token ids of a group, by id or by name; `nil` when there is no such group.
    func memberIDs(ofGroup id: Int64?, named name: String?, in project: Project) async throws -> [UInt32]?

    // MARK: Message log

    /// Appends an accepted message, then drops the project's oldest entries until the log holds
    /// at most `entries` entries and `bytes` bytes.
    func appendMessage(_ message: AcceptedMessage, body: String, entries: Int, bytes: Int) async throws
    /// A page of the project's logged messages, newest first, older than the log position
    /// `before`; at most `limit` entries and about `bytes` bytes of bodies (always at least one).
    func messages(_ filter: MessageFilter, in project: Project, before: Int64?, limit: Int, bytes: Int) async throws
        -> Page<LoggedMessage>
    /// Entries and bytes of each project's message log, by project id.
    func messageLogUsage() async throws -> [String: (entries: Int, bytes: Int)]

    // MARK: Tokens

    func token(_ token: String, in project: Project) async throws -> TokenInfo?
    /// The groups (by name) a token belongs to.
    func groups(ofToken token: String, in project: Project) async throws -> [Membership]
    /// Registers a new token or re-registers an unregistered one.
    func registerToken(_ token: String, in project: Project) async throws -> TokenInfo
    /// Marks the token unregistered and removes it from every group (deleting groups it empties)
    /// and topic, all at once. Returns `nil` when the project does not know the token.
    func unregisterToken(_ token: String, in project: Project) async throws -> TokenInfo?
}
