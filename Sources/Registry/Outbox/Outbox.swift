import Foundation

/// The relay's durable work: one outbox job per accepted message of a relaying project, and one
/// delivery row per recipient once it has been attempted, except a recipient of a walk delivered
/// at its first attempt: the walk's cursor says that it was, and no row is written for it.
///
/// A topic or condition job walks its recipient set (the message log's own chunks) after a
/// cursor, a page at a time, so that nothing per recipient is written on the request path. A
/// direct job (a token, `registration_ids`, a device group) has its delivery rows from the start,
/// because its tokens may be ones the registry has never seen.
///
/// Jobs are claimed with a lease: a server renews it with every page it records, and another
/// server takes the job over once it expires. A page's outcomes, the cursor and the counts are
/// one transaction, and only the claim's holder may record them.
///
/// A store does not write these rules: it conforms to `OutboxDriver` too, whose statements the
/// rules in `OutboxEngine.swift` run, once for every store.
public protocol OutboxStore: Sendable {
    /// Every relaying project's channel settings, by the project's row id.
    func relaySettings() async throws -> [Int64: ChannelSettings]
    /// Turns delivery on (or, with `nil`, off) for a project, with `audit`'s entry in the same
    /// transaction.
    func setRelay(_ settings: ChannelSettings?, for project: Project, audit: AuditWrite?) async throws

    /// Logs the message and puts it in the outbox, in one transaction.
    /// - Parameters:
    ///   - template: the v1 `message` object without `token`, as JSON text.
    ///   - direct: the recipient tokens of a direct send (each once); `nil` for a walk of the recipients.
    ///   - claimant: a server that takes the job at once (a direct send it answers for), or `nil`.
    /// - Throws: `OutboxFull` when the project already has `bounds.outboxMessages` unfinished jobs.
    /// - Returns: the job's id.
    func enqueue(
        _ message: AcceptedMessage, body: String, template: String, deadline: Date, direct: [String]?,
        claimant: String?, leaseUntil: Date, bounds: OutboxBounds
    ) async throws -> Int64

    /// Claims up to `limit` unfinished jobs that are not claimed (or whose lease expired), are not
    /// waiting (`notBefore`), and whose project is not paused: direct sends first (someone waits
    /// for their answer), then the longest waiting, so that a job given back after its turn goes
    /// behind those that waited meanwhile.
    /// - Parameter skipping: projects whose fan-outs are not claimed now (the server already works
    ///   its share of them), so that one project's fan-outs never take all of a server.
    func claim(_ claimant: String, leaseUntil: Date, now: Date, limit: Int, skipping: Set<Int64>) async throws
        -> [OutboxJob]
    /// Gives back every unfinished job `claimant` holds, to be claimed at once: a server that
    /// starts again under the same name takes back what it held when it died.
    func releaseAll(claimedBy claimant: String) async throws
    /// The next page to attempt: retries that are due, then recipients not attempted yet.
    /// - Parameter inFlight: a page sent and not recorded yet, which this one follows: its
    ///   retries are not read again, and the walk goes on from its cursor instead of the stored one.
    func nextAttempts(of job: OutboxJob, after inFlight: AttemptPage?, now: Date, limit: Int) async throws
        -> AttemptPage
    /// Records a page's outcomes, moves the cursor, renews the lease; finishes the job when
    /// nothing is left pending. `nil` when `claimant` no longer holds the claim (nothing written).
    /// - Parameter mayFinish: `false` for a slice of a page still in flight, which cannot finish
    ///   the job: the pending rows are then not counted (and `nextRetryAt` is `nil`).
    func record(
        _ outcomes: [DeliveryOutcome], of job: OutboxJob, page: AttemptPage, claimant: String, leaseUntil: Date,
        now: Date, mayFinish: Bool
    ) async throws -> JobProgress?
    /// Extends the claim while a page is in flight; `false` when `claimant` no longer holds it.
    func renew(_ job: OutboxJob, claimant: String, leaseUntil: Date) async throws -> Bool
    /// Gives the job back, to be claimed again from `notBefore` on.
    func release(_ job: OutboxJob, claimant: String, notBefore: Date) async throws
    /// Pauses (or resumes, with `nil`) every job of the project: FCM's quota was spent.
    func pause(project: Int64, until: Date?, error: String?) async throws
    /// Counts a token the relay unregistered because FCM said it is gone.
    func countPruned(project: Int64, tokens: Int) async throws

    /// Stops what has not been sent of a relayed message: its job finishes at once, and the
    /// recipients without an outcome are cancelled (the job's `cancelledAt`; no row is written per
    /// recipient, so a cancelled fan-out of millions costs one statement). A page in flight when
    /// the cancel lands records nothing: its requests count as cancelled, though the channel may
    /// still deliver them. The message's completion event is queued in the same transaction.
    /// - Returns: the counts once cancelled; `nil` when the message was not relayed.
    /// - Throws: `RegistryError.messageFinished` when the job had already finished (or finished
    ///   meanwhile).
    /// Writes `audit`'s entry in the cancel's transaction.
    func cancel(message id: String, in project: Project, now: Date, audit: AuditWrite?) async throws
        -> DeliveryCounts?
    /// A logged message's delivery counts; `nil` when the message was not relayed.
    func delivery(ofMessage id: String, in project: Project) async throws -> DeliveryCounts?
    /// A message's deliveries in `state`, in the order they were attempted (pending ones not yet
    /// attempted last, in token order; delivered ones of a walk at their first attempt last, in
    /// token order). A page may hold fewer than `limit` entries and still have a next one.
    func deliveries(ofMessage id: String, in project: Project, state: DeliveryState, after: Int64?, limit: Int)
        async throws -> Page<DeliveryEntry>?
    /// The project's relay: its queue and what it did.
    func relayStatus(of project: Project) async throws -> RelayStatus?
}

extension OutboxStore {
    /// Records a whole page, which may finish the job.
    public func record(
        _ outcomes: [DeliveryOutcome], of job: OutboxJob, page: AttemptPage, claimant: String, leaseUntil: Date,
        now: Date
    ) async throws -> JobProgress? {
        try await record(outcomes, of: job, page: page, claimant: claimant, leaseUntil: leaseUntil, now: now, mayFinish: true)
    }

    /// Claims jobs of any project.
    public func claim(_ claimant: String, leaseUntil: Date, now: Date, limit: Int) async throws -> [OutboxJob] {
        try await claim(claimant, leaseUntil: leaseUntil, now: now, limit: limit, skipping: [])
    }
}

/// The outbox's own bound, and the message log's, which never evicts an unfinished job's message.
public struct OutboxBounds: Sendable {
    public var outboxMessages: Int
    public var logEntries: Int
    public var logBytes: Int

    public init(outboxMessages: Int, logEntries: Int, logBytes: Int) {
        self.outboxMessages = outboxMessages
        self.logEntries = logEntries
        self.logBytes = logBytes
    }
}

/// The project already has as many unfinished messages as the outbox holds.
public struct OutboxFull: Error, Sendable {
    public init() {}
}

/// A claimed job.
public struct OutboxJob: Sendable, Hashable {
    /// The message log row's id, which is also the job's.
    public var id: Int64
    public var messageID: String
    public var project: Int64
    /// What the channel sends for the message (FCM's: the v1 `message` object without `token`),
    /// as text.
    public var template: String
    /// After it, what is still pending fails (in the channel's words for a passed deadline).
    public var deadline: Date
    /// Whether this is a direct send (a token, `registration_ids`, a device group).
    public var isDirect: Bool

    public init(id: Int64, messageID: String, project: Int64, template: String, deadline: Date, isDirect: Bool) {
        self.id = id
        self.messageID = messageID
        self.project = project
        self.template = template
        self.deadline = deadline
        self.isDirect = isDirect
    }
}

/// One recipient to attempt.
public struct DeliveryAttempt: Sendable, Hashable {
    public var token: String
    /// The registry's id of the token, when it has one.
    public var tokenID: Int64?
    /// Attempts made before this one.
    public var attempts: Int
    /// Its delivery row, once it has one (a retry, or a direct send's recipient).
    public var deliveryID: Int64?

    public init(token: String, tokenID: Int64?, attempts: Int, deliveryID: Int64?) {
        self.token = token
        self.tokenID = tokenID
        self.attempts = attempts
        self.deliveryID = deliveryID
    }
}

/// A page of attempts, and where the walk of the recipients stands after it.
public struct AttemptPage: Sendable {
    public var attempts: [DeliveryAttempt]
    /// Recipients the walk found dead before sending (unregistered since the send): failed as
    /// gone without a call.
    public var alreadyGone: [DeliveryAttempt]
    /// The last token id walked, once this page is recorded.
    public var cursor: Int64
    /// Whether every recipient has been walked once this page is recorded.
    public var walked: Bool

    public init(attempts: [DeliveryAttempt], alreadyGone: [DeliveryAttempt], cursor: Int64, walked: Bool) {
        self.attempts = attempts
        self.alreadyGone = alreadyGone
        self.cursor = cursor
        self.walked = walked
    }

    public var isEmpty: Bool { attempts.isEmpty && alreadyGone.isEmpty }
}

public enum DeliveryState: String, Sendable, Hashable, Codable, CaseIterable {
    case pending
    case delivered
    case failed
    /// Never sent: the message was cancelled first. No delivery row holds it; a cancelled job's
    /// rows still pending, and its recipients the walk had not reached, read as cancelled.
    case cancelled
}

/// What became of one attempt.
public struct DeliveryOutcome: Sendable, Hashable {
    public var attempt: DeliveryAttempt
    public var state: DeliveryState
    /// The channel's reason (its error code), or the relay's own (`RELAY_OFF`, a passed deadline
    /// in the channel's words).
    public var error: String?
    /// For a pending one: when to try again.
    public var nextAttemptAt: Date?
    /// Whether a request went out: one held back (the quota closed before it started) costs the
    /// recipient no attempt.
    public var sent: Bool
    /// Whether the channel said the token is gone (or the walk found it unregistered): it is
    /// unregistered, and a webhook told `token.unregistered`. Decided by the verdict's type, never
    /// by the error's words.
    public var gone: Bool

    public init(
        attempt: DeliveryAttempt, state: DeliveryState, error: String?, nextAttemptAt: Date?, sent: Bool = true,
        gone: Bool = false
    ) {
        self.attempt = attempt
        self.state = state
        self.error = error
        self.nextAttemptAt = nextAttemptAt
        self.sent = sent
        self.gone = gone
    }

    /// The recipient's attempts once this outcome is recorded.
    public var attemptsAfter: Int { attempt.attempts + (sent ? 1 : 0) }
}

/// A job after a recorded page.
public struct JobProgress: Sendable, Hashable {
    public var finished: Bool
    /// The earliest retry still waiting, when no recipient is due now.
    public var nextRetryAt: Date?

    public init(finished: Bool, nextRetryAt: Date?) {
        self.finished = finished
        self.nextRetryAt = nextRetryAt
    }
}

/// A relayed message's recipients by state.
public struct DeliveryCounts: Sendable, Hashable, Codable {
    public var pending: Int
    public var delivered: Int
    public var failed: Int
    public var cancelled: Int

    public init(pending: Int, delivered: Int, failed: Int, cancelled: Int = 0) {
        self.pending = pending
        self.delivered = delivered
        self.failed = failed
        self.cancelled = cancelled
    }

    /// A job's counts: what is neither delivered nor failed yet is pending, or cancelled when the
    /// job was.
    public init(recipients: Int, delivered: Int, failed: Int, cancelled: Bool = false) {
        let unsent = recipients - delivered - failed
        self.init(
            pending: cancelled ? 0 : unsent, delivered: delivered, failed: failed, cancelled: cancelled ? unsent : 0)
    }

    /// A logged job's counts.
    public init(_ job: LoggedJob) {
        self.init(recipients: job.recipients, delivered: job.delivered, failed: job.failed, cancelled: job.cancelled)
    }
}

/// One recipient of a relayed message, as the deliveries listing shows it.
public struct DeliveryEntry: Sendable, Hashable {
    public var token: String
    public var state: DeliveryState
    public var error: String?
    public var attempts: Int
    /// Where the listing continues after this entry.
    public var position: Int64

    public init(token: String, state: DeliveryState, error: String?, attempts: Int, position: Int64) {
        self.token = token
        self.state = state
        self.error = error
        self.attempts = attempts
        self.position = position
    }
}

/// A project's relay, as `GET /api/relay` shows it.
public struct RelayStatus: Sendable, Hashable {
    public var projectID: String
    /// Recipients of unfinished messages without an outcome yet.
    public var pending: Int
    /// Unfinished messages a server holds a live claim on.
    public var inFlight: Int
    public var delivered: Int
    public var failed: Int
    /// Tokens unregistered because FCM said they are gone.
    public var pruned: Int
    public var pausedUntil: Date?
    public var lastError: String?
    /// When `lastError` was recorded: an error of last week reads differently from one of a minute ago.
    public var lastErrorAt: Date?
    /// The channel messages leave through, and its settings that may be shown (never a secret).
    public var channel: String
    public var settings: [String: JSONValue]

    public init(
        projectID: String, pending: Int, inFlight: Int, delivered: Int, failed: Int, pruned: Int, pausedUntil: Date?,
        lastError: String?, lastErrorAt: Date? = nil, channel: String, settings: [String: JSONValue]
    ) {
        self.projectID = projectID
        self.pending = pending
        self.inFlight = inFlight
        self.delivered = delivered
        self.failed = failed
        self.pruned = pruned
        self.pausedUntil = pausedUntil
        self.lastError = lastError
        self.lastErrorAt = lastErrorAt
        self.channel = channel
        self.settings = settings
    }
}
