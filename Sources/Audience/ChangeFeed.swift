/// What a committed write changed for the audience index.
///
/// Every write records its changes in the same transaction as the write itself, so the feed is
/// exactly the committed history: each server process (and command) on the database follows it
/// and keeps its own index equal to the tables.
public enum AudienceChange: Sendable, Hashable {
    case subscribed(project: Int64, topic: String, tokens: [UInt32])
    case unsubscribed(project: Int64, topic: String, tokens: [UInt32])
    case registered(project: Int64, tokens: [UInt32])
    case unregistered(project: Int64, tokens: [UInt32])
    /// Anything may have changed (a bulk writer such as `generate` wrote the tables directly):
    /// every follower reloads its index.
    case reset
}

/// One committed change and its place in the feed; positions grow in commit order.
public struct FeedEntry: Sendable, Hashable {
    public var position: Int64
    public var change: AudienceChange

    public init(position: Int64, change: AudienceChange) {
        self.position = position
        self.change = change
    }
}

/// A stretch of the feed as the store read it.
public struct FeedRead: Sendable {
    /// Entries after the position asked for, oldest first.
    public var entries: [FeedEntry]
    /// Entries right after the position asked for were already pruned: the reader missed changes
    /// and must reload its index from the tables.
    public var truncated: Bool

    public init(entries: [FeedEntry], truncated: Bool) {
        self.entries = entries
        self.truncated = truncated
    }
}

/// The audience as the tables hold it, and the feed position that state reflects.
public struct AudienceLoad: Sendable {
    /// Per project: each topic's sorted token ids, and the sorted ids of registered tokens.
    public var projects: [Int64: (topics: [String: [UInt32]], registered: [UInt32])]
    /// The last feed entry the loaded state includes.
    public var position: Int64

    public init(projects: [Int64: (topics: [String: [UInt32]], registered: [UInt32])], position: Int64) {
        self.projects = projects
        self.position = position
    }
}

/// Who hears of the commits a store makes: the audience index of the process.
///
/// The store calls `apply` after each commit and before the writers resume, so a write is in the
/// writer's own index at once (read-your-writes). What other processes committed before it comes
/// first in the same call: the store reads it inside the write transaction, from `position` on.
public protocol FeedListener: AnyObject, Sendable {
    /// The last entry applied.
    var position: Int64 { get }
    /// Applies entries in order, ignoring those at or before `position`.
    func apply(_ read: FeedRead)
}
