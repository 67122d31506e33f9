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
    /// Takes up to `slice` sends from the project's budget for `second` (seconds since 1970), in
    /// one transaction: the second's counter starts at zero, and never passes `rate`.
    /// - Returns: how many were taken; 0 when the second's budget is spent.
    func takeSendBudget(project: Int64, second: Int64, slice: Int, rate: Int) async throws -> Int
    /// The projects whose quota pause (`OutboxStore.pause`, written by whichever server met FCM's
    /// 429) lasts past `now`, and until when: every server stops their new requests too.
    func pausedProjects(at now: Date) async throws -> [Int64: Date]
}

/// What a project may send a second: FCM's quota is 600,000 a minute.
public enum SendRate {
    public static let range = 1...10_000_000
    public static let fcmDefault = 10_000
}
