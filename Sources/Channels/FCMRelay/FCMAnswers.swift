import Delivery
import Foundation
import Registry

/// FCM HTTP v1's answers in the engine's terms, after Google's error table (see `docs/relay.md`):
/// what each does to the recipient, and how the legacy and XMPP APIs word a refusal.
public enum FCMAnswers {
    /// Classifies one answer of `messages:send`.
    /// - Parameters:
    ///   - status: the HTTP status, or `nil` when no answer came (connection error, timeout).
    ///   - code: the `FcmError` detail's `errorCode`, else the error's `status`; `nil` for an
    ///     answer that is not Google's error JSON.
    ///   - retryAfter: the `Retry-After` header, in seconds.
    public static func verdict(status: Int?, code: String?, retryAfter: Int?) -> DeliveryVerdict {
        guard let status else { return .retryAfter(code ?? "UNAVAILABLE", seconds: nil) }
        switch status {
        case 200..<300:
            return .delivered
        // Only FCM's own words prune: a 404 or 403 without them (a proxy's error page, a wrong
        // `--upstream`, a path that moved) is the upstream's fault, retried with back-off. Pruning
        // on the status alone unregistered every recipient of a send behind a misconfigured proxy.
        case 404 where code == "UNREGISTERED":
            return .gone("UNREGISTERED")
        case 403 where code == "SENDER_ID_MISMATCH":
            return .gone("SENDER_ID_MISMATCH")
        case 403, 404:
            return .retryAfter(code ?? "HTTP_\(status)", seconds: retryAfter)
        case 429:
            return .slowDown(code ?? "QUOTA_EXCEEDED", seconds: RetryPolicy.quotaPause(retryAfter: retryAfter))
        case 500, 502, 503, 504:
            return .retryAfter(code ?? (status == 500 ? "INTERNAL" : "UNAVAILABLE"), seconds: retryAfter)
        // Our access token refused (the channel has already tried a fresh one); not
        // `THIRD_PARTY_AUTH_ERROR`, which is about the app's own APNs or web-push credentials.
        case 401 where code != "THIRD_PARTY_AUTH_ERROR":
            return .credentialsRefused(code ?? "UNAUTHENTICATED")
        default:
            return .failed(code ?? "HTTP_\(status)")
        }
    }

    /// FCM's words for what the engine decides without an answer of FCM's.
    public static let words = ChannelWords(
        unanswered: "UNAVAILABLE", quotaClosed: "QUOTA_EXCEEDED", deadlinePassed: "DEADLINE_EXCEEDED",
        gone: "UNREGISTERED")

    /// The legacy and XMPP answer for a recipient the upstream refused, as FCM's own would word it.
    public static func problem(for code: String, token: String, retryAfter: Int?) -> MessageProblem {
        switch code {
        case "UNREGISTERED": .notRegistered(token)
        case "SENDER_ID_MISMATCH": .senderIDMismatch(token)
        case "INVALID_ARGUMENT": .invalidRegistration(token)
        case "QUOTA_EXCEEDED": .quotaExceeded(retryAfter: retryAfter ?? RetryPolicy.quotaPause, topics: false)
        case "UNAVAILABLE", "DEADLINE_EXCEEDED": .unavailable(retryAfter: retryAfter)
        default: .internalError(retryAfter: retryAfter)
        }
    }
}

extension SendRate {
    /// FCM's quota: 600,000 a minute.
    public static let fcmDefault = 10_000
}
