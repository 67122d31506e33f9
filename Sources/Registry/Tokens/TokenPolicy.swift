import Foundation

/// When a token counts as fresh, by FCM's own guidance: a token whose app has not checked in for a
/// month is stale (firebase.google.com/docs/cloud-messaging/manage-tokens), whatever FCM still
/// answers for it.
public struct TokenPolicy: Sendable, Hashable {
    /// How long after it was last seen a token turns stale.
    public var staleAfter: Duration

    public init(staleAfter: Duration) {
        self.staleAfter = staleAfter
    }

    /// FCM's guidance: stale after 30 days.
    public static let standard = TokenPolicy(staleAfter: .seconds(30 * 86_400))

    /// Whether a token last seen at `lastSeenAt` is fresh at `now`.
    public func isFresh(lastSeenAt: Date, now: Date = Date()) -> Bool {
        now.timeIntervalSince(lastSeenAt) < Double(staleAfter.components.seconds)
    }
}
