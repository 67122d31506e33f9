import Foundation

/// What the relay does with each answer FCM HTTP v1 gives, after Google's error table and the
/// practice of Sygnal and Mattermost's push proxy (see `docs/relay.md`).
public enum DeliveryVerdict: Sendable, Hashable {
    case delivered
    /// The token is gone for this sender (`UNREGISTERED`, `SENDER_ID_MISMATCH`): never retried,
    /// and unregistered in the registry, so it leaves its groups and topics.
    case prune(String)
    /// The delivery fails without a retry (other 4xx). `reauthenticate`: a 401, after which the
    /// cached access token is dropped.
    case fail(String, reauthenticate: Bool)
    /// Try this recipient again, after at least `after` seconds when FCM said so.
    case retry(String, after: Int?)
    /// The project's quota is spent: every send of the project waits `seconds`.
    case pauseProject(String, seconds: Int)
}

public enum DeliveryPolicy {
    /// The least a project waits after `QUOTA_EXCEEDED` without `Retry-After`.
    public static let quotaPause = 60
    /// The longest back-off between two attempts of one recipient.
    public static let maximumBackOff: Double = 300

    /// Classifies one answer of `messages:send`.
    /// - Parameters:
    ///   - status: the HTTP status, or `nil` when no answer came (connection error, timeout).
    ///   - code: the `FcmError` detail's `errorCode`, else the error's `status`; `nil` for an
    ///     answer that is not Google's error JSON.
    ///   - retryAfter: the `Retry-After` header, in seconds.
    public static func verdict(status: Int?, code: String?, retryAfter: Int?) -> DeliveryVerdict {
        guard let status else { return .retry(code ?? "UNAVAILABLE", after: nil) }
        switch status {
        case 200..<300:
            return .delivered
        // Only FCM's own words prune: a 404 or 403 without them (a proxy's error page, a wrong
        // `--upstream`, a path that moved) is the upstream's fault, retried with back-off. Pruning
        // on the status alone unregistered every recipient of a send behind a misconfigured proxy.
        case 404 where code == "UNREGISTERED":
            return .prune("UNREGISTERED")
        case 403 where code == "SENDER_ID_MISMATCH":
            return .prune("SENDER_ID_MISMATCH")
        case 403, 404:
            return .retry(code ?? "HTTP_\(status)", after: retryAfter)
        case 429:
            return .pauseProject(code ?? "QUOTA_EXCEEDED", seconds: max(retryAfter ?? quotaPause, 1))
        case 500, 502, 503, 504:
            return .retry(code ?? (status == 500 ? "INTERNAL" : "UNAVAILABLE"), after: retryAfter)
        case 401:
            return .fail(code ?? "UNAUTHENTICATED", reauthenticate: code != "THIRD_PARTY_AUTH_ERROR")
        default:
            return .fail(code ?? "HTTP_\(status)", reauthenticate: false)
        }
    }

    /// Exponential back-off with jitter before attempt `attempts + 1`: about 1 s, 2 s, 4 s… (each
    /// between 75% and 125% of that), at most five minutes, and never sooner than `retryAfter`.
    public static func backOff(afterAttempts attempts: Int, retryAfter: Int?) -> TimeInterval {
        let base = min(maximumBackOff, pow(2, Double(max(0, attempts - 1))))
        let jittered = base * Double.random(in: 0.75...1.25)
        return max(jittered, Double(retryAfter ?? 0))
    }

    /// The legacy and XMPP answer for a recipient the upstream refused, as FCM's own would word it.
    public static func problem(for code: String, token: String, retryAfter: Int?) -> MessageProblem {
        switch code {
        case "UNREGISTERED": .notRegistered(token)
        case "SENDER_ID_MISMATCH": .senderIDMismatch(token)
        case "INVALID_ARGUMENT": .invalidRegistration(token)
        case "QUOTA_EXCEEDED": .quotaExceeded(retryAfter: retryAfter ?? quotaPause, topics: false)
        case "UNAVAILABLE", "DEADLINE_EXCEEDED": .unavailable(retryAfter: retryAfter)
        default: .internalError(retryAfter: retryAfter)
        }
    }
}
