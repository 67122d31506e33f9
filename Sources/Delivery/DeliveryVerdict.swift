/// What a channel's answer to one request means, by type: the engine decides what becomes of the
/// recipient from the case alone, and keeps the channel's own reason (its error code) as the
/// delivery's error, which the API, webhooks, metrics and logs show.
public enum DeliveryVerdict: Sendable, Hashable {
    case delivered
    /// Not now: try this recipient again, after at least `seconds` when the channel said so.
    case retryAfter(String, seconds: Int?)
    /// The project's quota is spent: every send of the project waits `seconds`.
    case slowDown(String, seconds: Int)
    /// The channel refused the server's own credentials for the project, even fresh ones: the
    /// recipient fails without a retry.
    case credentialsRefused(String)
    /// The token is gone for this sender: never retried, and unregistered in the registry, so it
    /// leaves its groups and topics.
    case gone(String)
    /// The delivery fails without a retry.
    case failed(String)
}

/// How a channel words what the engine decides without an answer of its own, so that the stored
/// deliveries, webhooks, metrics and logs speak the channel's language.
public struct ChannelWords: Sendable, Hashable {
    /// No answer came (a connection error, a timeout, a stalled request): retried.
    public var unanswered: String
    /// Held back, or paused, while the project's quota is closed.
    public var quotaClosed: String
    /// Still pending when the message's deadline passed.
    public var deadlinePassed: String
    /// A recipient the registry found unregistered before sending to it.
    public var gone: String

    public init(unanswered: String, quotaClosed: String, deadlinePassed: String, gone: String) {
        (self.unanswered, self.quotaClosed, self.deadlinePassed, self.gone) =
            (unanswered, quotaClosed, deadlinePassed, gone)
    }
}
