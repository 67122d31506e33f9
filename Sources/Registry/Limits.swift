/// The limits the registry enforces. Defaults are FCM's; every one can be configured.
public struct Limits: Sendable, Hashable {
    /// Members of one device group.
    public var membersPerGroup = 20
    /// Tokens in one `batchAdd` / `batchRemove` call.
    public var tokensPerBatch = 1000
    /// Topics one token may be subscribed to (then `TOO_MANY_TOPICS`).
    public var topicsPerToken = 2000
    /// Bytes of a request body (then 413).
    public var requestBodyBytes = 1 << 20
    /// Longest device-group name in UTF-8 bytes (after NFC); FCM documents none, so this only keeps rows sane.
    public var groupNameBytes = 256
    /// Entries per page of a listing when the caller does not say.
    public var defaultPageSize = 1000
    /// The most entries one page may hold.
    public var maximumPageSize = 2000
    /// Accepted messages kept in each project's message log.
    public var messageLogEntries = 1000
    /// Bytes (normalized message and compressed recipient set) kept in each project's message log.
    public var messageLogBytes = 64 << 20
    /// Bytes of message bodies one page of a message-log listing holds (at least one entry).
    public var messageLogPageBytes = 1 << 20
    /// Entries of the change feed kept for followers that fell behind; older ones are pruned and
    /// a follower that missed them reloads its index.
    public var feedRetention = 100_000
    /// How long a send's `Idempotency-Key` is kept, with its answer (Stripe's 24 hours).
    public var idempotencyRetention = Duration.seconds(86_400)
    /// How long the audit log keeps an entry (Stripe keeps its events log 30 days; 90 here).
    public var auditRetention = Duration.seconds(90 * 86_400)

    public init() {}
}
