import Conditions
import Registry

/// One problem with a message, in the words of every protocol: the one table the codecs answer from.
public struct ProblemWording: Sendable {
    /// The legacy HTTP code (table 9 of the HTTP reference).
    public var legacy: String
    /// Whether the legacy protocol refuses the request (400 `InvalidParameters`) rather than
    /// answering 200 with the code in the result.
    public var legacyRefusesRequest: Bool
    /// The XMPP nack code (table 4 of the XMPP reference).
    public var xmpp: String
    /// HTTP v1: the status code, Google's status name and FCM's error code.
    public var v1: (status: Int, name: String, fcmCode: String)
    /// What a person reads: XMPP's `error_description`, v1's message, legacy's 400 text.
    public var description: String
}

extension MessageProblem {
    public var wording: ProblemWording {
        let invalidArgument = (400, "INVALID_ARGUMENT", "INVALID_ARGUMENT")
        switch self {
        case .missingRegistration:
            return ProblemWording(
                legacy: "MissingRegistration", legacyRefusesRequest: false, xmpp: "INVALID_JSON", v1: invalidArgument,
                description: "Missing registration token: set to or condition")
        case .invalidRegistration(let token):
            return ProblemWording(
                legacy: "InvalidRegistration", legacyRefusesRequest: false, xmpp: "BAD_REGISTRATION",
                v1: invalidArgument,
                description: "Invalid registration token \(token.prefix(40))")
        case .notRegistered:
            return ProblemWording(
                legacy: "NotRegistered", legacyRefusesRequest: false, xmpp: "DEVICE_UNREGISTERED",
                v1: (404, "NOT_FOUND", "UNREGISTERED"), description: "Device unregistered")
        case .senderIDMismatch:
            return ProblemWording(
                legacy: "MismatchSenderId", legacyRefusesRequest: false, xmpp: "SENDER_ID_MISMATCH",
                v1: (403, "PERMISSION_DENIED", "SENDER_ID_MISMATCH"), description: "SenderId mismatch")
        case .unavailable:
            return ProblemWording(
                legacy: "Unavailable", legacyRefusesRequest: false, xmpp: "SERVICE_UNAVAILABLE",
                v1: (503, "UNAVAILABLE", "UNAVAILABLE"), description: "The service is currently unavailable.")
        case .outboxFull:
            return ProblemWording(
                legacy: "Unavailable", legacyRefusesRequest: false, xmpp: "SERVICE_UNAVAILABLE",
                v1: (503, "UNAVAILABLE", "UNAVAILABLE"),
                description: "The relay's outbox is full: too many messages wait for delivery. Retry later.")
        case .internalError:
            return ProblemWording(
                legacy: "InternalServerError", legacyRefusesRequest: false, xmpp: "INTERNAL_SERVER_ERROR",
                v1: (500, "INTERNAL", "INTERNAL"), description: "Internal error encountered.")
        case .quotaExceeded(_, let topics):
            return ProblemWording(
                legacy: topics ? "TopicsMessageRateExceeded" : "DeviceMessageRateExceeded", legacyRefusesRequest: false,
                xmpp: topics ? "TOPICS_MESSAGE_RATE_EXCEEDED" : "DEVICE_MESSAGE_RATE_EXCEEDED",
                v1: (429, "RESOURCE_EXHAUSTED", "QUOTA_EXCEEDED"), description: "Quota exceeded for sending messages.")
        case .invalidTTL(let text):
            return ProblemWording(
                legacy: "InvalidTtl", legacyRefusesRequest: false, xmpp: "INVALID_JSON", v1: invalidArgument,
                description: text)
        case .invalidDataKey(let key):
            return ProblemWording(
                legacy: "InvalidDataKey", legacyRefusesRequest: false, xmpp: "INVALID_JSON", v1: invalidArgument,
                description:
                    "Invalid data key \"\(key)\": from, message_type and keys starting with google or gcm are reserved")
        case .messageTooBig(let size, let limit):
            return ProblemWording(
                legacy: "MessageTooBig", legacyRefusesRequest: false, xmpp: "INVALID_JSON", v1: invalidArgument,
                description: "Message too big: \(size) bytes of payload, the limit is \(limit)")
        case .invalidCondition(let diagnostic, _):
            return ProblemWording(
                legacy: "InvalidParameters", legacyRefusesRequest: true, xmpp: "INVALID_JSON", v1: invalidArgument,
                description: "Invalid condition: \(diagnostic.message) at byte \(diagnostic.range.offset)")
        case .invalidParameters(let text, _):
            return ProblemWording(
                legacy: "InvalidParameters", legacyRefusesRequest: true, xmpp: "INVALID_JSON", v1: invalidArgument,
                description: text)
        }
    }

    /// Seconds an answer's `Retry-After` header asks the sender to wait; `nil` for none.
    public var retryAfter: Int? {
        switch self {
        case .unavailable(let seconds), .internalError(let seconds): seconds
        case .quotaExceeded(let seconds, _), .outboxFull(let seconds): seconds
        default: nil
        }
    }

    /// The field a v1 `fieldViolations` entry names.
    public var v1Field: String {
        switch self {
        case .invalidParameters(_, let field?): "message.\(field)"
        case .invalidCondition: "message.condition"
        case .invalidRegistration, .notRegistered, .senderIDMismatch, .missingRegistration: "message.token"
        case .invalidDataKey: "message.data"
        case .invalidTTL: "message.android.ttl"
        case .messageTooBig, .invalidParameters, .unavailable, .internalError, .quotaExceeded, .outboxFull: "message"
        }
    }
}
