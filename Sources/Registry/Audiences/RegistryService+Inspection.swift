import AudienceEngine
import Foundation

/// What FCM never showed: listings of groups, topics and their members, for the native API and
/// the command line.
extension RegistryService {
    public func projects() async throws -> [Project] {
        try await store.projects()
    }

    /// How many tokens the project has registered, and how many topics have a subscriber, as the
    /// audience index holds them: no row is counted.
    public func projectSize(_ project: Project) async -> (registeredTokens: Int, topics: Int) {
        let snapshot = audience.snapshot(of: project.rowID)
        // A pass over every topic: off the request path's threads, as all such work is.
        return await CostlyWork.run { (snapshot.registered.count, snapshot.topics.values.count(where: { $0.count > 0 })) }
    }

    /// A page of the project's groups by name, of those whose names start with `prefix` (composed
    /// as the names are stored: NFC).
    /// - Parameter incompleteOnly: only groups first met through a mirrored add or remove.
    public func groups(
        in project: Project, prefix: String = "", after: String?, limit: Int, incompleteOnly: Bool = false
    ) async throws -> Page<GroupSummary> {
        try await store.groups(
            in: project, prefix: prefix.precomposedStringWithCanonicalMapping, after: after, limit: limit,
            incompleteOnly: incompleteOnly)
    }

    /// A group and a page of its members; `nil` when there is no such group.
    public func groupMembers(named name: String, in project: Project, after: String?, limit: Int) async throws
        -> (GroupSummary, Page<Membership>)?
    {
        try await store.groupMembers(named: try groupName(name), in: project, after: after, limit: limit)
    }

    /// A page of the project's tokens by value, of those that start with `prefix`: browsing, not
    /// only looking one up.
    public func tokens(in project: Project, prefix: String = "", after: String?, limit: Int) async throws
        -> Page<TokenInfo>
    {
        // A prefix no token can start with lists nothing, and never reaches the store.
        guard prefix.isEmpty || RegistrationToken.isWellFormed(prefix) else { return Page(items: [], nextAfter: nil) }
        return try await store.tokens(in: project, prefix: prefix, after: after, limit: limit)
    }

    /// A page of the project's topics by name, of those whose names start with `prefix`, with
    /// subscriber counts.
    public func topics(in project: Project, prefix: String = "", after: String?, limit: Int) async throws
        -> Page<TopicSummary>
    {
        try await store.topics(in: project, prefix: prefix, after: after, limit: limit)
    }

    /// A page of the project's topics (those whose names start with `prefix`) by subscribers, most
    /// first, then by name: what a chart of the largest topics and a list sorted by size read.
    ///
    /// Ranked on the audience index, where every topic's count is at hand, so it never counts rows:
    /// one pass over the project's topics keeping the best `limit`. `after` is the previous page's
    /// last entry; a topic whose count changed between pages may be listed twice or not at all, as
    /// in any listing by a value that changes.
    public func topicsBySubscribers(
        in project: Project, prefix: String = "", after: TopicRank?, limit: Int
    ) async throws -> Page<TopicSummary> {
        let snapshot = audience.snapshot(of: project.rowID)
        let ranked = await CostlyWork.run {
            TopicRank.best(
                limit + 1,
                of: snapshot.topics.lazy.compactMap { name, members in
                    name.hasPrefix(prefix) && members.count > 0
                        ? TopicRank(subscribers: members.count, name: name) : nil
                },
                after: after)
        }
        let page = ranked.prefix(limit)
        let created = try await store.topicCreationTimes(page.map(\.name), in: project)
        // A topic the index still holds but the table no longer does (deleted since) is left out.
        let items = page.compactMap { rank in
            created[rank.name].map { TopicSummary(name: rank.name, subscriberCount: rank.subscribers, createdAt: $0) }
        }
        return Page(items: items, nextAfter: ranked.count > limit ? page.last?.position : nil)
    }

    /// A topic and a page of its subscribers; `nil` when no token is subscribed to it.
    public func topicSubscribers(named name: String, in project: Project, after: String?, limit: Int) async throws
        -> (TopicSummary, Page<Membership>)?
    {
        try await store.topicSubscribers(named: name, in: project, after: after, limit: limit)
    }

    /// The groups (by name) a token belongs to.
    public func groups(ofToken token: String, in project: Project) async throws -> [Membership] {
        try await store.groups(ofToken: token, in: project)
    }

    /// Entries and bytes of each project's message log, by project id (for metrics).
    public func messageLogUsage() async throws -> [String: (entries: Int, bytes: Int)] {
        try await messageLog.messageLogUsage()
    }
}
