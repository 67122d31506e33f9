import Foundation

/// A message in the log, as the listings show it.
public struct LoggedMessage: Sendable {
    public var id: String
    public var via: MessageProtocol
    /// The target as the sender wrote it (`/topics/news`, a condition, a token, …).
    public var target: String
    /// The normalized message, as JSON (never the raw request body).
    public var body: String
    public var receivedAt: Date
    public var recipientCount: Int
    /// The stale tokens the fan-out left out (`TokenPolicy.sendToStale` false).
    public var skippedStale: Int
    /// The relay's job for the message, read in the same query as the listing: `nil` when the
    /// message was logged, not relayed.
    public var job: LoggedJob?
    /// In a listing of the messages that reached a token: what became of it on that token.
    public var tokenDelivery: TokenDelivery?

    public init(
        id: String, via: MessageProtocol, target: String, body: String, receivedAt: Date, recipientCount: Int,
        skippedStale: Int = 0, job: LoggedJob? = nil
    ) {
        self.skippedStale = skippedStale
        self.id = id
        self.via = via
        self.target = target
        self.body = body
        self.receivedAt = receivedAt
        self.recipientCount = recipientCount
        self.job = job
    }

    /// The message's recipients by state, when it was relayed.
    public var delivery: DeliveryCounts? { job.map(DeliveryCounts.init) }
}

/// A logged message's outbox job: its counts and how far its recipients were walked. The message
/// listing reads it beside each message (and, when listing by token, that token's delivery row);
/// a message's counts and its deliveries listing read it alone.
public struct LoggedJob: Sendable, Hashable {
    /// The job's id, which is its message log row's.
    public var id: Int64
    public var recipients: Int
    public var delivered: Int
    public var failed: Int
    public var cursor: Int64
    public var walked: Bool
    public var isDirect: Bool
    public var finished: Bool
    /// Whether the job was cancelled (it is then finished too): what had no outcome never will.
    public var cancelled: Bool
    /// In a listing by token: the token's delivery row of the job, when it has one.
    public var row: TokenDelivery?

    public init(
        id: Int64, recipients: Int, delivered: Int, failed: Int, cursor: Int64, walked: Bool, isDirect: Bool,
        finished: Bool, cancelled: Bool = false, row: TokenDelivery? = nil
    ) {
        (self.id, self.recipients, self.delivered, self.failed) = (id, recipients, delivered, failed)
        (self.cursor, self.walked, self.isDirect, self.finished, self.row) = (cursor, walked, isDirect, finished, row)
        self.cancelled = cancelled
    }

    /// What became of the message on the token with this id: its row when it has one (a pending
    /// one of a cancelled job is cancelled); else delivered when the walk passed it (a
    /// first-attempt delivery of a walk leaves no row), cancelled or failed when the job finished
    /// before reaching it (cancelled, or the relay was turned off), pending otherwise.
    public func delivery(toTokenID id: Int64) -> TokenDelivery {
        if var row {
            if cancelled && row.state == .pending { row.state = .cancelled }
            return row
        }
        if !isDirect && cursor >= id { return TokenDelivery(state: .delivered, error: nil, attempts: 1) }
        if cancelled { return TokenDelivery(state: .cancelled, error: nil, attempts: 0) }
        if finished { return TokenDelivery(state: .failed, error: nil, attempts: 0) }
        return TokenDelivery(state: .pending, error: nil, attempts: 0)
    }
}

/// One recipient's delivery of one message.
public struct TokenDelivery: Sendable, Hashable {
    public var state: DeliveryState
    /// FCM's error code: the last one for a pending recipient, the final one for a failed one.
    public var error: String?
    public var attempts: Int

    public init(state: DeliveryState, error: String?, attempts: Int) {
        (self.state, self.error, self.attempts) = (state, error, attempts)
    }
}

/// Which of a project's logged messages a listing wants.
public enum MessageFilter: Sendable, Hashable {
    case all
    /// Those that reached the token with this id.
    case reaching(UInt32)
}

/// The emulator's sink: accepted messages and whom they reached, kept per project in the
/// database, so that a test suite can ask what a device would have received, from any server
/// process and after a restart.
///
/// Each project's log is bounded in entries and in bytes (`Limits.messageLogEntries`,
/// `Limits.messageLogBytes`); the oldest entries go first. An entry costs its normalized JSON
/// plus its recipient set, compressed.
public struct StoreMessageLog: MessageSink {
    let log: any MessageLogStore
    let limits: Limits

    public init(log: any MessageLogStore, limits: Limits) {
        self.log = log
        self.limits = limits
    }

    public func relays(_ project: Project) async throws -> Bool { false }

    public func accept(_ message: AcceptedMessage) async throws -> DirectOutcomes {
        try await log.appendMessage(
            message, body: Self.normalizedJSON(message.message), entries: limits.messageLogEntries,
            bytes: limits.messageLogBytes)
        return .none
    }

    /// The message as stored and listed: sorted keys, so equal messages read the same.
    public static func normalizedJSON(_ message: Message) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(message)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }
}

extension RegistryService {
    /// A page of the project's logged messages, newest first, bounded by `limit` entries and by
    /// `Limits.messageLogPageBytes` of message bodies (at least one entry per page).
    public func loggedMessages(_ filter: MessageFilter, in project: Project, after: String?, limit: Int) async throws
        -> Page<LoggedMessage>
    {
        try await messageLog.messages(
            filter, in: project, before: after.flatMap(Int64.init), limit: min(max(limit, 1), limits.maximumPageSize),
            bytes: limits.messageLogPageBytes)
    }

    /// The logged message with this id.
    /// - Throws: `.messageNotFound` when the log does not hold it.
    public func loggedMessage(_ id: String, in project: Project) async throws -> LoggedMessage {
        guard id.utf8.count <= 256, let message = try await messageLog.message(id, in: project) else {
            throw RegistryError.messageNotFound
        }
        return message
    }

    /// The project's logged messages that reached `token`: none when the project does not know it.
    public func loggedMessages(to token: String, in project: Project, after: String?, limit: Int) async throws
        -> Page<LoggedMessage>
    {
        try checkToken(token)
        guard let id = try await store.tokenID(token, in: project) else {
            return Page(items: [], nextAfter: nil)
        }
        var page = try await loggedMessages(.reaching(id), in: project, after: after, limit: limit)
        for index in page.items.indices {
            page.items[index].tokenDelivery = page.items[index].job?.delivery(toTokenID: Int64(id))
        }
        return page
    }
}
