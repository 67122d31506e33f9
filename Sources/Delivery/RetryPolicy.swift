import Foundation

/// How long the engine waits: after a quota pause with no `Retry-After`, and between two attempts
/// of one recipient, after Google's scaling guide and the practice of Sygnal and Mattermost's push
/// proxy (see `docs/relay.md`).
public enum RetryPolicy {
    /// The least a project waits after its quota closes without `Retry-After`.
    public static let quotaPause = 60

    /// How long a project pauses after its quota closed: `Retry-After` when the upstream gave
    /// one, else `quotaPause`, and at least a second.
    public static func quotaPause(retryAfter: Int?) -> Int {
        max(retryAfter ?? quotaPause, 1)
    }
    /// The longest back-off between two attempts of one recipient.
    public static let maximumBackOff: Double = 300

    /// Exponential back-off with jitter before attempt `attempts + 1`: about 1 s, 2 s, 4 s… (each
    /// between 75% and 125% of that), at most five minutes, and never sooner than `retryAfter`.
    public static func backOff(afterAttempts attempts: Int, retryAfter: Int?) -> TimeInterval {
        let base = min(maximumBackOff, pow(2, Double(max(0, attempts - 1))))
        let jittered = base * Double.random(in: 0.75...1.25)
        return max(jittered, Double(retryAfter ?? 0))
    }

}
