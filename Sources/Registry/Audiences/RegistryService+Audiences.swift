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
    /// - Throws: `.malformedToken`, `.invalidTopicName`, `.groupNotFound`, `.undecryptableKey`, `ConditionError`.
    public func resolve(_ target: AudienceTarget, in project: Project, after: UInt32?, pageSize: Int?, countOnly: Bool)
        async throws -> Audience
    {
        let limit = self.pageSize(pageSize)
        let snapshot = audience.snapshot(of: project.rowID)
        var result: Audience
        var page: [UInt32] = []
        switch target {
        case .condition(let source, let dialect) where countOnly:
            // One job: nothing waits on SQLite.
            let (condition, count) = try await CostlyWork.run {
                let condition = try Condition(parsing: source, dialect: dialect)
                return (condition, snapshot.count(condition.expression))
            }
            return Self.audience(of: condition, count: count, in: snapshot)
        case .condition(let source, let dialect):
            let (condition, ids) = try await CostlyWork.run {
                let condition = try Condition(parsing: source, dialect: dialect)
                return (condition, snapshot.ids(of: condition.expression, after: after, limit: limit + 1))
            }
            // The page's token values are read while the count is computed: one waits on SQLite,
            // the other on the CPU.
            let listed = Array(ids.prefix(limit))
            async let values = listed.isEmpty ? [] : store.tokenValues(ids: listed, in: project)
            let count = await CostlyWork.run { snapshot.count(condition.expression) }
            result = Self.audience(of: condition, count: count, in: snapshot)
            result.tokens = try await values
            result.nextAfter = ids.count > limit ? listed.last : nil
            return result
        case .topic(let name):
            try checkTopicName(name)
            let members = snapshot.members(of: name)
            result = Audience(count: members.count, topicCounts: [name: members.count])
            if !countOnly { page = members.ids(after: after, limit: limit + 1) }
        case .token(let token):
            try checkToken(token)
            let members = try await store.tokenIDs([token], in: project)[token].map { [$0] } ?? []
            result = Audience(count: members.count)
            if !countOnly { page = Self.page(of: members, after: after, limit: limit + 1) }
        case .group(let name):
            guard let members = try await store.memberIDs(ofGroup: nil, named: try groupName(name), in: project) else {
                throw RegistryError.groupNotFound
            }
            result = Audience(count: members.count)
            if !countOnly { page = Self.page(of: members, after: after, limit: limit + 1) }
        case .notificationKey(let key):
            guard let id = try await groupID(forNotificationKey: key, in: project) else {
                throw RegistryError.undecryptableKey
            }
            guard let members = try await store.memberIDs(ofGroup: id, named: nil, in: project) else {
                throw RegistryError.groupNotFound
            }
            result = Audience(count: members.count)
            if !countOnly { page = Self.page(of: members, after: after, limit: limit + 1) }
        }
        if !countOnly {
            let hasMore = page.count > limit
            page = Array(page.prefix(limit))
            result.tokens = try await store.tokenValues(ids: page, in: project)
            result.nextAfter = hasMore ? page.last : nil
        }
        return result
    }

    /// A condition's audience without its page: the count, and each topic's subscribers.
    private static func audience(of condition: Condition, count: Int, in snapshot: AudienceIndex.Snapshot) -> Audience {
        var result = Audience(count: count, condition: condition)
        result.topicCounts = Dictionary(
            uniqueKeysWithValues: condition.topics.map { ($0, snapshot.members(of: $0).count) })
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
