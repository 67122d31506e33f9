import Foundation

/// A project's counts in one minute, as `GET /api/stats` gives them: messages accepted (logged,
/// relayed or not), deliveries that ended delivered or failed, tokens pruned on FCM's word.
public struct MinuteStats: Sendable, Hashable {
    /// The minute's start, in epoch milliseconds.
    public var minute: Int64
    public var accepted: Int
    public var delivered: Int
    public var failed: Int
    public var pruned: Int

    public init(minute: Int64, accepted: Int = 0, delivered: Int = 0, failed: Int = 0, pruned: Int = 0) {
        (self.minute, self.accepted) = (minute, accepted)
        (self.delivered, self.failed, self.pruned) = (delivered, failed, pruned)
    }

    /// How long the store keeps a minute: a day, and an hour more so that a 24-hour window is full.
    public static let retention: Int64 = 25 * 3_600_000
    /// The most expired rows one accepted message purges: bounded work in the accept path, and
    /// more than the one row a minute each project adds, so the table stays about a day long.
    public static let purgeLimit = 16
    /// The longest window `GET /api/stats` answers.
    public static let longestWindow: Int64 = 24 * 3_600_000

    /// The start of the minute `milliseconds` falls in.
    public static func minute(of milliseconds: Int64) -> Int64 {
        milliseconds - ((milliseconds % 60_000) + 60_000) % 60_000
    }

    /// The count an accepted message adds, in the minute it was received.
    public static func accepted(_ message: AcceptedMessage) -> MinuteStats {
        MinuteStats(minute: minute(of: EpochMilliseconds.milliseconds(message.receivedAt)), accepted: 1)
    }

    /// Minutes before this one are expired at `now` (epoch milliseconds) and may be purged.
    public static func expiry(at now: Int64) -> Int64 {
        minute(of: now) - retention
    }
}

extension RegistryService {
    /// The project's counts a minute over the last `window` (at most a day), oldest first; minutes
    /// without any count are left out.
    public func minuteStats(in project: Project, window: Duration) async throws -> [MinuteStats] {
        let span = min(EpochMilliseconds.milliseconds(window), MinuteStats.longestWindow)
        let now = EpochMilliseconds.now()
        // The window ends with the current minute and holds `span` of whole minutes.
        let from = MinuteStats.minute(of: now) + 60_000 - span
        return try await messageLog.minuteStats(of: project.rowID, from: from)
    }
}
