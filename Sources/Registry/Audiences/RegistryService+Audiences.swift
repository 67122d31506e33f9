import AudienceEngine
import Conditions

/// What an audience is asked for: exactly one way of naming a set of tokens.
public enum AudienceTarget: Sendable, Hashable {
    case token(String)
    case notificationKey(String)
    /// A device group by name.
    case group(String)
    case topic(String)
    case condition(String, Dialect)
}

/// The tokens a target reaches: how many, one page of them in token-id order, and for a condition
/// how many subscribers each of its topics has.
public struct Audience: Sendable {
    public var count: Int
    /// `nil` when only the count was asked for.
    public var tokens: [String]?
    /// Pass as `after` for the next page; `nil` on the last page.
    public var nextAfter: UInt32?
    /// Subscribers per topic named by a condition (or the one topic).
    public var topicCounts: [String: Int]?
    /// The parsed condition, when the target is one.
    public var condition: Condition?
}

extension Audience {
    /// The token of the page after this one, `nil` on the last page.
    public var nextPageToken: String? {
        nextAfter.map { PageToken(.audience, after: String($0)).encoded }
    }
}

extension RegistryService {
    /// Resolves `target` to the tokens it reaches, counting with set algebra on the audience index
    /// (never by evaluating token after token) and reading token values only for the page returned.
    ///
    /// - Parameters:
    ///   - after: the `nextAfter` of the previous page.
    ///   - countOnly: skip the listing.
    ///   - filter: only the tokens that say what it asks (a `where`): the index's attribute
    ///     bitmaps narrow the count, the page and each topic's count alike.
    /// - Throws: `.malformedToken`, `.invalidTopicName`, `.groupNotFound`, `.undecryptableKey`, `ConditionError`.
    public func resolve(
        _ target: AudienceTarget, in project: Project, after: UInt32?, pageSize: Int?, countOnly: Bool,
        where filter: AttributeFilter? = nil
    ) async throws -> Audience {
        let limit = self.pageSize(pageSize)
        let snapshot = audience.snapshot(of: project.rowID)
        let filter = filter.flatMap { $0.isEmpty ? nil : $0 }
        var members: [UInt32]
        switch target {
        case .condition(let source, let dialect):
            let condition = try await CostlyWork.run { try Condition(parsing: source, dialect: dialect) }
            return try await resolve(
                condition.expression, condition: condition, filter: filter, in: snapshot, project: project,
                after: after, limit: limit, countOnly: countOnly)
        case .topic(let name) where filter != nil:
            try checkTopicName(name)
            // A topic narrowed is the condition of that one topic, counted within the filter.
            return try await resolve(
                .topic(name, SourceRange(offset: 0, length: 0)), condition: nil, filter: filter, in: snapshot,
                project: project, after: after, limit: limit, countOnly: countOnly)
        case .topic(let name):
            try checkTopicName(name)
            let topic = snapshot.members(of: name)
            let result = Audience(count: topic.count, topicCounts: [name: topic.count])
            if countOnly { return result }
            return try await listing(topic.ids(after: after, limit: limit + 1), of: result, limit: limit, in: project)
        case .token(let token):
            try checkToken(token)
            members = try await store.tokenIDs([token], in: project)[token].map { [$0] } ?? []
        case .group(let name):
            guard let ids = try await store.memberIDs(ofGroup: nil, named: try groupName(name), in: project) else {
                throw RegistryError.groupNotFound
            }
            members = ids
        case .notificationKey(let key):
            guard let id = try await groupID(forNotificationKey: key, in: project) else {
                throw RegistryError.undecryptableKey
            }
            guard let ids = try await store.memberIDs(ofGroup: id, named: nil, in: project) else {
                throw RegistryError.groupNotFound
            }
            members = ids
        }
        if let filter {
            // A group holds at most a few thousand tokens: each is looked up in the filter's bitmaps.
            let listed = members
            members = await CostlyWork.run { snapshot.matching(listed, where: filter) }
        }
        let result = Audience(count: members.count)
        if countOnly { return result }
        return try await listing(Self.page(of: members, after: after, limit: limit + 1), of: result, limit: limit, in: project)
    }

    /// A condition's (or a narrowed topic's) audience: the count, each topic's subscribers and,
    /// unless only the count is asked for, one page, all within `filter` when there is one.
    private func resolve(
        _ expression: Expression, condition: Condition?, filter: AttributeFilter?, in snapshot: AudienceIndex.Snapshot,
        project: Project, after: UInt32?, limit: Int, countOnly: Bool
    ) async throws -> Audience {
        let topics = condition?.topics ?? expression.topics
        /// The count and each topic's subscribers, within the filter when there is one.
        let counts = { @Sendable () -> (Int, [String: Int]) in
            guard let filter else {
                return (
                    snapshot.count(expression),
                    Dictionary(uniqueKeysWithValues: topics.map { ($0, snapshot.members(of: $0).count) })
                )
            }
            return snapshot.counts(expression, topics: topics, where: filter)
        }
        if countOnly {
            let (count, topicCounts) = await CostlyWork.run(counts)
            return Audience(count: count, topicCounts: topicCounts, condition: condition)
        }
        let ids = await CostlyWork.run { snapshot.ids(of: expression, after: after, limit: limit + 1, where: filter) }
        // The page's token values are read while the count is computed: one waits on the
        // database, the other on the CPU.
        let listed = Array(ids.prefix(limit))
        async let values = listed.isEmpty ? [] : store.tokenValues(ids: listed, in: project)
        let (count, topicCounts) = await CostlyWork.run(counts)
        var result = Audience(count: count, topicCounts: topicCounts, condition: condition)
        result.tokens = try await values
        result.nextAfter = ids.count > limit ? listed.last : nil
        return result
    }

    /// `result` with the page of `ids` (one more than `limit` when there is a next page) as token values.
    private func listing(_ ids: [UInt32], of result: Audience, limit: Int, in project: Project) async throws
        -> Audience
    {
        var result = result
        let page = Array(ids.prefix(limit))
        result.tokens = page.isEmpty ? [] : try await store.tokenValues(ids: page, in: project)
        result.nextAfter = ids.count > limit ? page.last : nil
        return result
    }

    /// Up to `limit` ids of a sorted array greater than `after`.
    static func page(of sorted: [UInt32], after: UInt32?, limit: Int) -> [UInt32] {
        guard let after else { return Array(sorted.prefix(limit)) }
        var low = 0
        var high = sorted.count
        while low < high {
            let middle = (low + high) / 2
            if sorted[middle] <= after { low = middle + 1 } else { high = middle }
        }
        return Array(sorted[low...].prefix(limit))
    }
}
