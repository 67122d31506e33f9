import Registry

/// A way to devices. The engine (`DeliveryWorker`) claims the outbox's jobs, reads their pages,
/// paces each project within its budget, records the outcomes and retries; a channel only sends a
/// round of one job's recipients and says what each answer means, by type (`DeliveryVerdict`).
/// Channels are registered by name (`ChannelRegistry`); FCM HTTP v1 (`FCMChannel`, in `FCMRelay`)
/// is the first.
public protocol DeliveryChannel: Sendable {
    /// The channel's name, as a project's relay settings name it (`ChannelSettings.channel`), and
    /// by which the engine finds it (`ChannelRegistry`): FCM HTTP v1's is `fcm-v1`.
    static var name: String { get }

    /// What the channel sends for a message, made once when the message is accepted and kept with
    /// its outbox job (FCM's: the v1 `message` object without `token`).
    static func template(of message: AcceptedMessage) -> String

    /// Sends one request per attempt, in order, each started only while `gate` is open, and tells
    /// `gate` when an answer closes the project's quota.
    ///
    /// Calls `answered` once per attempt, as soon as that attempt's answer is final (not when it
    /// is about to be sent again), so that the engine records outcomes while the rest of the round
    /// is still out; returns once every attempt has had its call.
    /// - Parameter settings: the project's settings for this channel (`project relay`).
    func send(
        _ attempts: [DeliveryAttempt], of job: OutboxJob, with settings: ChannelSettings, gate: SendGate,
        answered: @escaping AnswerSink
    ) async
    /// How the legacy and XMPP APIs word a recipient the channel refused with `code`, for the
    /// sender of a direct send who waits for the answer.
    func refusal(_ code: String, token: String) -> MessageProblem
    /// The channel's words for what the engine decides without its answer (no answer, the quota
    /// closed, the deadline passed, a token already gone).
    var words: ChannelWords { get }
    /// Closes what the channel holds open (connections, clients), once nothing more is sent.
    func shutdown() async
}

/// Takes the final answer of the attempt at `index` of a round: called from any thread, and
/// quickly, since a channel may call it from its network's event loop.
public typealias AnswerSink = @Sendable (_ index: Int, _ answer: ChannelAnswer) -> Void

/// What became of one request a channel sent.
public enum ChannelAnswer: Sendable, Hashable {
    /// An answer, by type (`DeliveryVerdict`).
    case answered(DeliveryVerdict)
    /// Never sent: the gate closed first. It costs the recipient no attempt.
    case notSent
    /// Sent and left unanswered far longer than the rest of its round: lost on the way, tried
    /// again at once.
    case stalled
    /// No answer at all: a connection error, a timeout, no access token.
    case unanswered
}

/// What a round asks before each of its requests starts, and tells when an answer closes the
/// quota: the quota is the project's, so one 429 stops every round of the project at once.
public struct SendGate: Sendable {
    /// Whether no new request may start now (the project is paused).
    public var isClosed: @Sendable () -> Bool
    /// An answer closed the quota: the project pauses, honouring its `Retry-After` (seconds)
    /// when it has one.
    public var quotaClosed: @Sendable (_ retryAfter: Int?) -> Void

    public init(isClosed: @escaping @Sendable () -> Bool, quotaClosed: @escaping @Sendable (_ retryAfter: Int?) -> Void) {
        self.isClosed = isClosed
        self.quotaClosed = quotaClosed
    }
}
