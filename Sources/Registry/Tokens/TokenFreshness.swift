import AudienceEngine
import Foundation

/// How fresh a project's registered tokens are (`GET /api/tokens:freshness`), counted from how many
/// were last seen on each UTC day (days since 1970-01-01), so that it never reads a token: a token's
/// age is whole days (today's date minus the day it was last seen), and a count can differ from the
/// tokens' own `fresh` by those last seen on the boundary day.
public struct TokenFreshness: Sendable, Hashable {
    public var registered: Int
    /// Last seen fewer whole days ago than the policy's `staleAfter` (in days, rounded up).
    public var fresh: Int
    public var stale: Int
    /// With expiry on, tokens the sweep unregisters within 7 days (or at its next round, for those
    /// past `expireAfter` already); 0 without expiry.
    public var expiringIn7Days: Int
    /// `byMonth[i]`: tokens last seen between `30·i` and `30·(i+1)` days ago; the last of the
    /// `months` entries holds every older one. A last-seen day after today (a clock ahead) counts as today.
    public var byMonth: [Int]
    /// The policy the tokens were counted under.
    public var policy: TokenPolicy

    /// The number of `byMonth` entries: a year, and the older rest.
    public static let months = 13
    public static let daysPerMonth = 30

    /// The freshness of the tokens counted in `seenDays` (last-seen UTC day → tokens) under `policy` at `now`.
    public init(seenDays: [Int32: Int], policy: TokenPolicy, now: Date = Date()) {
        let today = Int(SeenDay.of(secondsSince1970: now.timeIntervalSince1970))
        let staleDays = Self.days(policy.staleAfter)
        let expireDays = policy.expireAfter.map(Self.days)
        (registered, fresh, expiringIn7Days, self.policy) = (0, 0, 0, policy)
        byMonth = Array(repeating: 0, count: Self.months)
        for (day, count) in seenDays where count > 0 {
            let age = max(0, today - Int(day))
            registered += count
            if age < staleDays { fresh += count }
            if let expireDays, age + 7 >= expireDays { expiringIn7Days += count }
            byMonth[min(age / Self.daysPerMonth, Self.months - 1)] += count
        }
        stale = registered - fresh
    }

    /// A duration in whole days, rounded up.
    private static func days(_ duration: Duration) -> Int {
        Int((duration.components.seconds + 86_399) / 86_400)
    }
}

extension RegistryService {
    /// How fresh the project's registered tokens are under its token policy, at `now`.
    public func tokenFreshness(in project: Project, now: Date = Date()) async throws -> TokenFreshness {
        let policy = try await tokenPolicy(of: project)
        return TokenFreshness(
            seenDays: try await store.registeredTokensBySeenDay(in: project), policy: policy, now: now)
    }
}
