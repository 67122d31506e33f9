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
    /// Tokens' attributes as they now are, each whole: `values[i]` is `tokens[i]`'s.
    case described(project: Int64, tokens: [UInt32], values: [IndexedAttributes])
    /// Tokens a registration call named: seen on `day` (``SeenDay``).
    case seen(project: Int64, tokens: [UInt32], day: Int32)
    /// Anything may have changed (a bulk writer such as `generate` wrote the tables directly):
    /// every follower reloads its index.
    case reset
}

/// One committed change and the id the store gave it. Ids grow, but not necessarily in commit
/// order: a backend with several writers (PostgreSQL sequences) can commit id 8 before id 7.
public struct FeedEntry: Sendable, Hashable {
    public var id: Int64
    public var change: AudienceChange

    public init(id: Int64, change: AudienceChange) {
        self.id = id
        self.change = change
    }
}

/// Where a reader of the feed stands: opaque to the index, which only keeps it and hands it back.
///
/// A backend whose ids are commit-ordered (SQLite: one writer) only ever moves the watermark. One
/// whose ids are not may see id 8 committed while id 7 is still in flight: it advances the
/// watermark no further than the oldest id that may still commit (below it, everything has
/// committed or never will), and lists the ids above it already read in `seenAbove`, so that the
/// next read returns 7 once it commits, and never 8 again. So no change is skipped, however late
/// it commits under a lower id.
public struct FeedCursor: Sendable, Hashable {
    /// Every change with an id at or below it has been read (or will never commit).
    public var watermark: Int64
    /// Ids above the watermark already read, ascending.
    public var seenAbove: [Int64]

    public init(watermark: Int64, seenAbove: [Int64] = []) {
        self.watermark = watermark
        self.seenAbove = seenAbove
    }

    /// Before the first change.
    public static let start = FeedCursor(watermark: 0)
}

/// A stretch of the feed as the store read it.
public struct FeedRead: Sendable {
    /// Changes after the cursor asked for, in the order to apply them.
    public var entries: [FeedEntry]
    /// Changes right after the cursor asked for were already pruned: the reader missed changes
    /// and must reload its index from the tables.
    public var truncated: Bool
    /// The cursor after these entries.
    public var next: FeedCursor

    public init(entries: [FeedEntry], truncated: Bool, next: FeedCursor) {
        self.entries = entries
        self.truncated = truncated
        self.next = next
    }
}

/// The audience as the tables hold it, and the feed cursor that state reflects.
public struct AudienceLoad: Sendable {
    /// Per project: each topic's sorted token ids, and the sorted ids of registered tokens.
    public var projects: [Int64: (topics: [String: [UInt32]], registered: [UInt32])]
    /// Per project: what its tokens say and when they were last seen.
    public var attributes: [Int64: TokenAttributeIndex]
    /// Every change the loaded state includes is at or before it.
    public var cursor: FeedCursor

    public init(
        projects: [Int64: (topics: [String: [UInt32]], registered: [UInt32])],
        attributes: [Int64: TokenAttributeIndex] = [:], cursor: FeedCursor
    ) {
        self.projects = projects
        self.attributes = attributes
        self.cursor = cursor
    }
}
