import Foundation

/// The webhooks' fixed rules, after Stripe's and Svix's: how many a project has, how much waits
/// for one, how long a rotated secret signs on, when a failing one is disabled.
public enum WebhookRules {
    /// Webhooks a project may have: Stripe's 16 endpoints.
    public static let webhooksPerProject = 16
    /// Events waiting for one webhook; past it, new events for that webhook are dropped and
    /// counted (`dropped`). A day of a busy project's events through a dead receiver fits.
    public static let backlogPerWebhook = 1_000_000
    /// How long the secret before a rotation keeps signing beside the new one (Svix's 24 h).
    public static let rotationOverlap: TimeInterval = 24 * 3600
    /// A webhook whose every attempt failed for this long is disabled (the 3 days; Svix
    /// waits 5, Stripe tells by mail).
    public static let disableAfter: TimeInterval = 3 * 24 * 3600
    /// The secret's random bytes (the Standard Webhooks spec asks for 24 to 64).
    public static let secretBytes = 32

    /// A new signing secret: `whsec_` and the base64 of `secretBytes` random bytes.
    public static func makeSecret() -> String {
        var generator = SystemRandomNumberGenerator()
        let bytes = (0..<secretBytes).map { _ in UInt8.random(in: 0...255, using: &generator) }
        return "whsec_" + Data(bytes).base64EncodedString()
    }

    /// A new public id: a prefix and 22 random base62 characters (about 131 bits), as Svix's
    /// `ep_…` and `msg_…`.
    public static func makeID(prefix: String) -> String {
        let alphabet = Array("0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
        var generator = SystemRandomNumberGenerator()
        return prefix + String((0..<22).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &generator)] })
    }
}

/// When a failed event is tried again: a wait after each failed attempt, Svix's schedule by
/// default (5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 10 h: eight attempts over about 27 h 35 min).
public struct WebhookRetrySchedule: Sendable, Hashable {
    /// The wait after the first failed attempt, after the second, …; once spent, the event fails.
    public var waits: [Duration]

    public static let standard = WebhookRetrySchedule(waits: [
        .seconds(5), .seconds(300), .seconds(1800), .seconds(7200), .seconds(18_000), .seconds(36_000),
        .seconds(36_000),
    ])

    public init(waits: [Duration]) {
        self.waits = waits
    }

    /// The wait after `attempts` failed attempts; `nil` when none is left.
    public func wait(afterAttempts attempts: Int) -> Duration? {
        attempts >= 1 && attempts <= waits.count ? waits[attempts - 1] : nil
    }

    /// Every wait added up: how long an event is retried.
    public var total: Duration { waits.reduce(.zero, +) }
}
