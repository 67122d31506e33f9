import Foundation

/// Each project's budget of sends to FCM a second, shared by every server on the database.
///
/// FCM's quota is the project's, whatever the number of servers sending for it. So the budget is
/// one counter per project in the database, for the current second: a server takes a slice of it
/// before it sends, and together the servers never take more than the project's rate in one
/// second. A lone server takes every slice and reaches the full rate.
public protocol SendBudgetStore: Sendable {
    /// The projects given a rate of their own (`project relay --rate`), by row id.
    func sendRates() async throws -> [Int64: Int]
    /// Gives the project a rate of its own, or (`nil`) leaves it to `serve --relay-rate`.
    func setSendRate(_ rate: Int?, for project: Project) async throws
    /// Takes up to `slice` sends from the project's budget for the current second, in one
    /// transaction: the second's counter starts at zero and, but for an overdraw, never passes
    /// `rate`. The second is the database's (PostgreSQL's clock, for servers on many machines), so
    /// that servers whose clocks disagree still count into one second.
    /// - Parameter overdraw: take the whole slice even past the rate: a direct send, which never
    ///   waits; it is counted, so the fan-outs after it wait the longer.
    func takeSendBudget(project: Int64, slice: Int, rate: Int, overdraw: Bool) async throws -> SendBudgetSlice
    /// The projects whose quota pause (`OutboxStore.pause`, written by whichever server met FCM's
    /// 429) lasts past `now`, and until when: every server stops their new requests too.
    func pausedProjects(at now: Date) async throws -> [Int64: Date]
}

/// What a server took from a project's budget.
public struct SendBudgetSlice: Sendable, Hashable {
    /// Sends taken; 0 when the second's budget is spent.
    public var granted: Int
    /// The second they belong to, in seconds since 1970 by the database's clock.
    public var second: Int64
    /// How long that second still lasts: what is taken and not sent by then lapses.
    public var secondEndsIn: TimeInterval

    public init(granted: Int, second: Int64, secondEndsIn: TimeInterval) {
        self.granted = granted
        self.second = second
        self.secondEndsIn = secondEndsIn
    }

    /// The slice of `second`, taken at `now` (seconds since 1970).
    public static func taking(_ granted: Int, at now: Double) -> SendBudgetSlice {
        let second = now.rounded(.down)
        return SendBudgetSlice(granted: granted, second: Int64(second), secondEndsIn: second + 1 - now)
    }

    /// How many of `slice` sends a take grants when `used` are gone already: the rule both
    /// stores apply inside their transaction.
    public static func grant(_ slice: Int, used: Int, rate: Int, overdraw: Bool) -> Int {
        overdraw ? slice : max(0, min(slice, rate - used))
    }
}

/// What a project may send a second.
public enum SendRate {
    public static let range = 1...10_000_000
}
