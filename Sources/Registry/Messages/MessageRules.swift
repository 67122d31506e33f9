import Conditions

/// What is wrong with a downstream message, in no protocol's words: the legacy HTTP API, XMPP and
/// HTTP v1 each word these their own way (tables 4–9 of the HTTP reference, table 4 of XMPP).
public enum MessageProblem: Error, Sendable, Hashable {
    /// No recipient at all.
    case missingRegistration
    /// A recipient token that is not well-formed.
    case invalidRegistration(String)
    /// A recipient the app server reported dead.
    case notRegistered(String)
    /// A recipient another project (another sender) registered, and this one never has.
    case senderIDMismatch(String)
    /// FCM could not take the message now (an injected fault): retry, after `retryAfter` seconds.
    case unavailable(retryAfter: Int?)
    /// The relay's outbox holds as many undelivered messages as it may: nothing was taken; retry
    /// after `retryAfter` seconds. Answered with HTTP 503 in every protocol that has a status.
    case outboxFull(retryAfter: Int)
    /// FCM failed inside (an injected fault): retry with back-off.
    case internalError(retryAfter: Int?)
    /// The sending quota is spent (an injected fault): wait `retryAfter` seconds. `topics` for a
    /// send to topics or a condition, which the legacy API words differently.
    case quotaExceeded(retryAfter: Int, topics: Bool)
    /// `time_to_live` / `ttl` outside 0…2,419,200 seconds, or not a whole number.
    case invalidTTL(String)
    /// A data key FCM keeps for itself.
    case invalidDataKey(String)
    case messageTooBig(size: Int, limit: Int)
    case invalidCondition(Diagnostic, source: String)
    /// A field of the wrong type or value, or targets that do not fit together.
    case invalidParameters(String, field: String?)
}

/// The rules every protocol shares.
public enum MessageRules {
    /// Four weeks, FCM's longest time to live.
    public static let maximumTimeToLive = 2_419_200
    /// Payload bytes (data and notification, keys and values) of most messages.
    public static let maximumPayload = 4096
    /// Payload bytes of messages to topics (and conditions).
    public static let maximumTopicPayload = 2048

    /// `from`, `message_type`, and anything starting with `google` or `gcm` are FCM's own.
    public static func checkDataKeys(_ keys: some Sequence<String>) throws(MessageProblem) {
        for key in keys {
            let lowered = key.lowercased()
            if lowered == "from" || lowered == "message_type" || lowered.hasPrefix("google") || lowered.hasPrefix("gcm")
            {
                throw .invalidDataKey(key)
            }
        }
    }

    public static func checkTimeToLive(_ seconds: Double) throws(MessageProblem) {
        guard seconds.rounded() == seconds, seconds >= 0, seconds <= Double(maximumTimeToLive) else {
            throw .invalidTTL("time_to_live must be a whole number of seconds from 0 to \(maximumTimeToLive) (4 weeks)")
        }
    }

    /// The checks that depend on the message alone, not on its recipients: data keys, time to
    /// live, and the payload size for the kind of target.
    public static func checkContent(_ message: Message) throws(MessageProblem) {
        try checkDataKeys(message.data.keys)
        if let seconds = message.options.timeToLive { try checkTimeToLive(seconds) }
        try checkSize(payloadBytes: message.payloadBytes, toTopics: message.isToTopics)
    }

    /// - Parameter payloadBytes: see `Message.payloadBytes`.
    public static func checkSize(payloadBytes: Int, toTopics: Bool) throws(MessageProblem) {
        let limit = toTopics ? maximumTopicPayload : maximumPayload
        if payloadBytes > limit { throw .messageTooBig(size: payloadBytes, limit: limit) }
    }

    /// Parses a condition in `dialect`, turning its error into a message problem.
    public static func condition(_ source: String, dialect: Dialect) throws(MessageProblem) -> Condition {
        do {
            return try Condition(parsing: source, dialect: dialect)
        } catch {
            throw .invalidCondition(error.diagnostic, source: source)
        }
    }
}
