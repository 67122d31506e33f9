import Foundation

/// The statements a store runs for the relay's outbox, and nothing of its rules: those live once,
/// in `OutboxStore`'s implementation for every driver (`OutboxEngine.swift`), as swift-jobs keeps
/// its queue's policy above `JobQueueDriver`.
///
/// Each requirement is one transaction (or one read). Where a rule must be decided inside a
/// transaction, from what it reads there, the engine hands the decision in as a synchronous
/// closure: SQLite's group-commit writer runs its transactions synchronously, PostgreSQL's are
/// async, and a plain function serves both. Everything else the engine computes before the call,
/// so a transaction costs no more statements (and PostgreSQL no more round trips) than it must.
///
/// Times are epoch milliseconds, as the tables keep them.
public protocol OutboxDriver: Sendable {
    // MARK: Settings

    /// Every `relay` row's settings, by the project's row id.
    func relayRows() async throws -> [Int64: ChannelSettings]
    /// Inserts or replaces the project's `relay` row, not paused, and `audit`'s entry with it.
    func storeRelay(_ settings: ChannelSettings, of project: Project, audit: AuditWrite?) async throws
    /// In one transaction: the pending deliveries of the project's unfinished jobs fail with
    /// `error`, those jobs finish (what was not delivered counts as failed, nobody holds them),
    /// and the `relay` row is deleted, and `audit`'s entry written.
    func dropRelay(of project: Int64, failingPendingWith error: String, now: Int64, audit: AuditWrite?) async throws

    // MARK: Jobs

    /// In one transaction: logs the message, calls `admit` with the number of the project's
    /// unfinished jobs (it throws to refuse), inserts the job, and for a direct send one pending
    /// delivery row per recipient (the token's id when the project knows it, else the token), due
    /// at `job.notBefore`.
    /// - Returns: the message log row's id, which is the job's.
    func insertJob(_ job: NewOutboxJob, admitting admit: @escaping @Sendable (_ unfinished: Int) throws -> Void)
        async throws -> Int64
    /// In one transaction: takes up to `limit` claimable jobs for `claimant` (unfinished, not
    /// before `notBefore`, unclaimed or with an expired lease, of a project not paused, not a
    /// fan-out of a project in `skipping`): direct sends first (someone waits for their answer),
    /// then the longest waiting (`notBefore`), so that no other claim takes the same job.
    func claimJobs(_ claimant: String, leaseUntil: Int64, now: Int64, limit: Int, skipping: [Int64]) async throws
        -> [OutboxJob]
    /// Extends a lease `claimant` holds on an unfinished job; `false` when it holds none.
    func renewLease(of job: Int64, claimant: String, until: Int64) async throws -> Bool
    /// Gives back every unfinished job `claimant` holds, claimable at once.
    func releaseJobs(claimedBy claimant: String) async throws
    /// Gives back a job `claimant` holds, claimable from `notBefore` on.
    func releaseJob(_ job: Int64, claimant: String, notBefore: Int64) async throws
    /// In one transaction, and only while the job is unfinished (else `false`, nothing written):
    /// finishes it as cancelled (`cancelledAt` and `finishedAt` at `now`, nobody's claim), and
    /// queues its completion for the project's webhooks (`WebhookEventBatch(finishing:now:)`), and
    /// inserts `audit`'s entry.
    func cancelJob(_ job: Int64, project: Int64, messageID: String, now: Int64, audit: AuditWrite?) async throws
        -> Bool
    /// Changes the `relay` row's counters, pause and last error, in one statement.
    func updateRelay(of project: Int64, _ change: RelayChange) async throws

    // MARK: Pages

    /// Up to `limit` pending delivery rows of a job due at `now`, earliest due first.
    func dueRetries(of job: Int64, now: Int64, limit: Int) async throws -> [DeliveryAttempt]
    /// The job's walk: the last token id walked (-1: none) and whether all are; `nil` without a job.
    func walkState(of job: Int64) async throws -> (cursor: Int64, walked: Bool)?
    /// Up to `limit` recipient ids of a logged message after `cursor`, ascending: its
    /// `messageRecipientChunk` rows from `RecipientWalk.firstChunk` on, read through a `RecipientWalk`.
    func recipientIDs(of message: Int64, after cursor: Int64, limit: Int) async throws -> [UInt32]
    /// The tokens of a walk's ids, in id order (an id whose token is gone has none).
    func walkTokens(_ ids: [UInt32]) async throws -> [WalkedToken]
    /// In one transaction, and only while `page.claimant` holds the unfinished job's claim (else
    /// `nil`, nothing written): writes the delivery rows in order, reads the job's pending rows
    /// (when `page.countsPending`; else the job does not finish), asks `finishes` whether that
    /// finishes the job, updates the job (walk, counts, lease; a
    /// finished one gets `finishedAt = page.now` and loses its claim) and the relay's counters.
    /// - Returns: whether the job finished, and the earliest pending row's `nextAttemptAt`.
    func recordPage(_ page: PageWrites, finishes: @escaping @Sendable (_ pending: Int) -> Bool) async throws
        -> (finished: Bool, nextRetryAt: Int64?)?

    // MARK: What users see

    /// The job of a logged message of the project, for the counts and the deliveries listing.
    func loggedJob(ofMessage id: String, in project: Int64) async throws -> LoggedJob?
    /// Up to `limit` delivery rows of a job in `state` with ids after `after`, by id; an entry's
    /// position is its row's id.
    func deliveryRows(of job: Int64, state: DeliveryState, after: Int64, limit: Int) async throws -> [DeliveryEntry]
    /// Which of `ids` have a delivery row of the job.
    func attemptedTokenIDs(of job: Int64, among ids: [UInt32]) async throws -> Set<Int64>
    /// The project's `relay` row, `nil` when it does not relay.
    func relayRow(of project: Int64) async throws -> RelayRow?
    /// The project's unfinished jobs: recipients without an outcome, and jobs with a live claim at `now`.
    func openQueue(of project: Int64, now: Int64) async throws -> (pending: Int, inFlight: Int)
}

/// A job to insert, with the message it logs.
public struct NewOutboxJob: Sendable {
    public var message: AcceptedMessage
    public var body: String
    /// The recipients as `messageRecipientChunk` rows.
    public var chunks: [(chunk: Int64, ids: Data)]
    /// The message log's bound, which never evicts an unfinished job's message.
    public var logEntries: Int
    public var logBytes: Int
    public var template: String
    /// A direct send's recipient tokens, each once; `nil` for a walk.
    public var direct: [String]?
    public var recipients: Int
    public var walked: Bool
    public var claimant: String?
    public var leaseUntil: Int64?
    public var notBefore: Int64
    public var deadline: Int64
    public var createdAt: Int64
}

/// A recipient's token as a walk finds it.
public struct WalkedToken: Sendable, Hashable {
    public var id: Int64
    public var value: String
    public var isRegistered: Bool

    public init(id: Int64, value: String, isRegistered: Bool) {
        self.id = id
        self.value = value
        self.isRegistered = isRegistered
    }
}

/// One delivery row a page writes: an update of `id`'s row, or a new row without one.
public struct DeliveryRowWrite: Sendable {
    public var id: Int64?
    /// A new row's recipient: the registry's token id, or else the token itself.
    public var tokenID: Int64?
    public var token: String?
    public var state: DeliveryState
    public var error: String?
    public var attempts: Int
    public var nextAttemptAt: Int64?
}

/// What recording a page writes, computed before its transaction.
public struct PageWrites: Sendable {
    public var job: Int64
    public var project: Int64
    public var claimant: String
    public var now: Int64
    /// In the order the outcomes came, so that new rows' ids follow the attempts.
    public var rows: [DeliveryRowWrite]
    public var cursor: Int64
    public var walked: Bool
    public var leaseUntil: Int64
    /// What the page adds to the job's counts and the relay's (with its last error).
    public var tally: RelayChange
    /// Whether the job's pending rows are counted (to tell whether it finishes): not for a slice
    /// of a page still in flight, which cannot finish it.
    public var countsPending: Bool
    /// The events the page causes for the project's webhooks (`appendWebhookEvents` of each store).
    public var webhookEvents = WebhookEventBatch()
}

/// A change of a `relay` row: counters added, a pause set, an error remembered.
public struct RelayChange: Sendable {
    public var delivered = 0
    public var failed = 0
    public var pruned = 0
    /// `nil` keeps the pause as it is; `.some(nil)` lifts it.
    public var pausedUntil: Int64??
    /// `nil` keeps the last error as it is.
    public var lastError: String?
    /// When `lastError` was recorded (epoch milliseconds); written with it, and only with it.
    public var lastErrorAt: Int64?
    /// The minute (its start, epoch milliseconds) whose `minuteStat` row the counters are also
    /// added to, in the same transaction; `nil` adds them to none.
    public var minute: Int64?

    public init() {}
}

/// A `relay` row without its secrets.
public struct RelayRow: Sendable {
    public var delivered: Int
    public var failed: Int
    public var pruned: Int
    public var pausedUntil: Int64?
    public var lastError: String?
    /// When `lastError` was recorded (epoch milliseconds); `nil` for an error recorded before the
    /// time was kept.
    public var lastErrorAt: Int64?
    public var channel: String
    /// What of the channel's settings may be shown.
    public var settings: [String: JSONValue]

    public init(
        delivered: Int, failed: Int, pruned: Int, pausedUntil: Int64?, lastError: String?, lastErrorAt: Int64?,
        channel: String, settings: [String: JSONValue]
    ) {
        (self.delivered, self.failed, self.pruned) = (delivered, failed, pruned)
        (self.pausedUntil, self.lastError, self.lastErrorAt) = (pausedUntil, lastError, lastErrorAt)
        (self.channel, self.settings) = (channel, settings)
    }
}
