import Foundation

/// A device group as operations see it.
public struct GroupRef: Sendable, Hashable {
    public var id: Int64
    public var name: String
    /// Members after the operation; zero means the group was deleted with its last member.
    public var memberCount: Int

    public init(id: Int64, name: String, memberCount: Int) {
        self.id = id
        self.name = name
        self.memberCount = memberCount
    }
}

/// A group in a listing.
public struct GroupSummary: Sendable, Hashable, Codable {
    public var name: String
    public var memberCount: Int
    public var createdAt: Date
    /// False for a group first met through a mirrored `add` or `remove` (`project mirror`): it was
    /// made at Google before, and may have members there this database has never seen.
    public var complete: Bool

    public init(name: String, memberCount: Int, createdAt: Date, complete: Bool = true) {
        self.name = name
        self.memberCount = memberCount
        self.createdAt = createdAt
        self.complete = complete
    }
}

/// How much of a project's device groups this database knows: what `project mirror --report`
/// shows to choose the cut-over day.
public struct GroupCompleteness: Sendable, Hashable, Codable {
    /// Groups whose every member is known here: made here, imported, or created through the mirror.
    public var complete: Int
    /// Groups first met through a mirrored `add` or `remove`: members at Google may be missing.
    public var incomplete: Int
    /// Members of the incomplete groups, learned from the calls the mirror forwarded.
    public var membersLearned: Int

    public init(complete: Int, incomplete: Int, membersLearned: Int) {
        self.complete = complete
        self.incomplete = incomplete
        self.membersLearned = membersLearned
    }
}

/// A topic in a listing.
public struct TopicSummary: Sendable, Hashable, Codable {
    public var name: String
    public var subscriberCount: Int
    public var createdAt: Date

    public init(name: String, subscriberCount: Int, createdAt: Date) {
        self.name = name
        self.subscriberCount = subscriberCount
        self.createdAt = createdAt
    }
}

/// A token's membership in a group or subscription to a topic, with when it began.
public struct Membership: Sendable, Hashable, Codable {
    /// The group name, topic name, or token, depending on which side is listed.
    public var name: String
    public var since: Date

    public init(name: String, since: Date) {
        self.name = name
        self.since = since
    }
}

/// One token subscribed to one topic.
public struct SubscriptionInfo: Sendable, Hashable {
    public var token: String
    public var topic: String
    public var createdAt: Date

    public init(token: String, topic: String, createdAt: Date) {
        self.token = token
        self.topic = topic
        self.createdAt = createdAt
    }
}

/// What the registry knows of one token.
public struct TokenInfo: Sendable, Hashable, Codable {
    public var token: String
    public var state: TokenState
    public var createdAt: Date
    public var updatedAt: Date
    /// When the app last checked in: the app server's `lastSeenAt`, or the last registration call
    /// that named the token. A token from before attributes were kept reads its `updatedAt`.
    public var lastSeenAt: Date
    public var attributes: TokenAttributes

    public init(
        token: String, state: TokenState, createdAt: Date, updatedAt: Date, lastSeenAt: Date? = nil,
        attributes: TokenAttributes = TokenAttributes()
    ) {
        self.token = token
        self.state = state
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.lastSeenAt = lastSeenAt ?? updatedAt
        self.attributes = attributes
    }
}

/// The result for one token of a batch subscription call, in IID's words.
public enum BatchOutcome: String, Sendable, Hashable {
    case ok = ""
    case invalidArgument = "INVALID_ARGUMENT"
    case notFound = "NOT_FOUND"
    case tooManyTopics = "TOO_MANY_TOPICS"
}

/// One page of a listing, with the cursor for the next page when there is one.
public struct Page<Item: Sendable>: Sendable {
    public var items: [Item]
    /// The last key of this page, to pass as `after` for the next; `nil` on the last page.
    public var nextAfter: String?

    public init(items: [Item], nextAfter: String?) {
        self.items = items
        self.nextAfter = nextAfter
    }
}
