import Foundation

/// A project's measure of its tokens' freshness, by FCM's own guidance
/// (firebase.google.com/docs/cloud-messaging/manage-tokens): a token whose app has not checked in
/// for a month is stale, whatever FCM still answers for it; one not seen for longer than
/// `expireAfter` (Android's tokens lapse after 270 days) is unregistered by the expiry sweep
/// (`TokenExpirySweep`), as an FCM `UNREGISTERED` answer unregisters it.
public struct TokenPolicy: Sendable, Hashable {
    /// How long after it was last seen a token turns stale.
    public var staleAfter: Duration
    /// How long after it was last seen a token is unregistered; `nil`: never (the default).
    public var expireAfter: Duration?
    /// Whether fan-outs (topic, condition, device group) reach stale tokens too.
    public var sendToStale: Bool

    public init(staleAfter: Duration, expireAfter: Duration? = nil, sendToStale: Bool = true) {
        self.staleAfter = staleAfter
        self.expireAfter = expireAfter
        self.sendToStale = sendToStale
    }

    /// FCM's guidance: stale after 30 days, no expiry, stale tokens still sent to.
    public static let standard = TokenPolicy(staleAfter: .seconds(30 * 86_400))

    /// The shortest duration either setting takes: an hour, so that a typo in a unit (`30s` for
    /// `30d`) cannot expire a project's tokens within the minute.
    public static let minimum: Duration = .seconds(3_600)
    /// The longest: ten years, longer than any token is worth keeping unseen.
    public static let maximum: Duration = .seconds(3_650 * 86_400)

    /// Whether a token last seen at `lastSeenAt` is fresh at `now`.
    public func isFresh(lastSeenAt: Date, now: Date = Date()) -> Bool {
        now.timeIntervalSince(lastSeenAt) < Double(staleAfter.components.seconds)
    }

    /// The last-seen time before which a token has expired at `now`; `nil` without expiry.
    public func expiryCutoff(now: Date) -> Date? {
        expireAfter.map { now.addingTimeInterval(-Double($0.components.seconds)) }
    }

    /// Checks the rules: each duration a whole number of seconds between `minimum` and `maximum`,
    /// and `expireAfter` longer than `staleAfter` (a token goes stale before it expires; an expiry
    /// as short as staleness would leave nothing ever stale).
    /// - Throws: `RegistryError.invalidTokenPolicy` naming the setting at fault.
    public func validate() throws(RegistryError) {
        guard Self.isInRange(staleAfter) else { throw .invalidTokenPolicy(.staleAfterRange) }
        if let expireAfter {
            guard Self.isInRange(expireAfter) else { throw .invalidTokenPolicy(.expireAfterRange) }
            guard expireAfter > staleAfter else { throw .invalidTokenPolicy(.expireNotAfterStale) }
        }
    }

    private static func isInRange(_ duration: Duration) -> Bool {
        duration.components.attoseconds == 0 && duration >= minimum && duration <= maximum
    }
}

/// A change to a project's `TokenPolicy`: a setting left `nil` keeps its value; `expireAfter`'s
/// `.some(nil)` turns expiry off.
public struct TokenPolicyChange: Sendable, Hashable {
    public var staleAfter: Duration?
    public var expireAfter: Duration??
    public var sendToStale: Bool?

    public init(staleAfter: Duration? = nil, expireAfter: Duration?? = nil, sendToStale: Bool? = nil) {
        (self.staleAfter, self.expireAfter, self.sendToStale) = (staleAfter, expireAfter, sendToStale)
    }

    /// Whether the change names no setting.
    public var isEmpty: Bool { staleAfter == nil && expireAfter == nil && sendToStale == nil }

    /// `policy` with the change made.
    public func applied(to policy: TokenPolicy) -> TokenPolicy {
        var changed = policy
        if let staleAfter { changed.staleAfter = staleAfter }
        if let expireAfter { changed.expireAfter = expireAfter }
        if let sendToStale { changed.sendToStale = sendToStale }
        return changed
    }
}

/// Which setting of a token policy was refused, and why: `RegistryError.invalidTokenPolicy`'s
/// reason, worded in `FCMWire`'s one table (`RefusalWording`).
public enum TokenPolicyProblem: Sendable, Hashable {
    case staleAfterRange, expireAfterRange, expireNotAfterStale
    case staleAfterNotDuration, expireAfterNotDuration, sendToStaleNotBoolean
    case notObject, unknownKey, empty

    /// The request field at fault.
    public var field: String {
        switch self {
        case .staleAfterRange, .staleAfterNotDuration: "tokenPolicy.staleAfter"
        case .expireAfterRange, .expireNotAfterStale, .expireAfterNotDuration: "tokenPolicy.expireAfter"
        case .sendToStaleNotBoolean: "tokenPolicy.sendToStale"
        case .notObject, .unknownKey, .empty: "tokenPolicy"
        }
    }
}
