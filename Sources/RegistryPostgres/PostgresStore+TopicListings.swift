import AudienceEngine
import Foundation
import PostgresNIO
import Registry

/// A token's whole set of topics, and the listings of topics and subscribers.
extension PostgresStore {
    public func subscriptions(ofToken token: String, in project: Project, after: String?, limit: Int) async throws
        -> Page<SubscriptionInfo>?
    {
        try await database.withConnection { connection in
            guard
                let (id, state) = try await connection.first(
                    #"SELECT id, state FROM token WHERE "projectId" = \#(project.rowID) AND value = \#(token)"#,
                    as: (Int32, String).self),
                state == TokenState.registered.rawValue
            else { return nil }
            var items: [SubscriptionInfo] = []
            for try await (name, createdAt) in try await connection.query(
                #"""
                SELECT topic.name, subscription."createdAt" FROM subscription JOIN topic ON topic.id = subscription."topicId"
                WHERE subscription."tokenId" = \#(id) AND topic.name > \#(after ?? "") ORDER BY topic.name LIMIT \#(limit + 1)
                """#, logger: .silent
            ).decode((String, Int64).self) {
                items.append(SubscriptionInfo(token: token, topic: name, createdAt: EpochMilliseconds.date(createdAt)))
            }
            let page = Array(items.prefix(limit))
            return Page(items: page, nextAfter: items.count > limit ? page.last?.topic : nil)
        }
    }

    public func topics(in project: Project, prefix: String, after: String?, limit: Int) async throws
        -> Page<TopicSummary>
    {
        try await database.withConnection { connection in
            // Names compare bytewise (the column's collation is "C"), as SQLite compares them, so a
            // prefix is one range of the index: [prefix, prefix + U+10FFFF).
            // Past the previous page's last name, or from the prefix itself (which may be a name).
            let (lower, start) =
                after.map { $0.utf8.lexicographicallyPrecedes(prefix.utf8) } == false
                ? (">", after ?? "") : (">=", prefix)
            let end = prefix.isEmpty ? nil : prefix + "\u{10FFFF}"
            var items: [TopicSummary] = []
            for try await (name, createdAt, subscribers) in try await connection.query(
                #"""
                SELECT name, "createdAt", (SELECT COUNT(*) FROM subscription WHERE "topicId" = topic.id)::bigint
                FROM topic
                WHERE "projectId" = \#(project.rowID) AND name \#(unescaped: lower) \#(start)
                  AND name < COALESCE(\#(end)::text, name || 'x')
                ORDER BY name LIMIT \#(limit + 1)
                """#, logger: .silent
            ).decode((String, Int64, Int64).self) {
                items.append(TopicSummary(name: name, subscriberCount: Int(subscribers), createdAt: EpochMilliseconds.date(createdAt)))
            }
            let page = Array(items.prefix(limit))
            return Page(items: page, nextAfter: items.count > limit ? page.last?.name : nil)
        }
    }

    public func topicSubscribers(named name: String, in project: Project, after: String?, limit: Int) async throws
        -> (TopicSummary, Page<Membership>)?
    {
        try await database.withConnection { connection in
            guard
                let (id, createdAt, count) = try await connection.first(
                    #"""
                    SELECT id, "createdAt", (SELECT COUNT(*) FROM subscription WHERE "topicId" = topic.id)::bigint
                    FROM topic WHERE "projectId" = \#(project.rowID) AND name = \#(name)
                    """#, as: (Int64, Int64, Int64).self)
            else { return nil }
            var members: [(Int32, Membership)] = []
            for try await (tokenID, value, since) in try await connection.query(
                #"""
                SELECT token.id, token.value, subscription."createdAt" FROM subscription
                JOIN token ON token.id = subscription."tokenId"
                WHERE subscription."topicId" = \#(id) AND subscription."tokenId" > \#(Int32(after ?? "") ?? 0)
                ORDER BY subscription."tokenId" LIMIT \#(limit + 1)
                """#, logger: .silent
            ).decode((Int32, String, Int64).self) {
                members.append((tokenID, Membership(name: value, since: EpochMilliseconds.date(since))))
            }
            let page = Array(members.prefix(limit))
            return (
                TopicSummary(name: name, subscriberCount: Int(count), createdAt: EpochMilliseconds.date(createdAt)),
                Page(items: page.map(\.1), nextAfter: members.count > limit ? page.last.map { String($0.0) } : nil)
            )
        }
    }
}

extension PostgresConnection {
    /// The first row, decoded, or `nil` when there is none.
    func first<each Column: PostgresDecodable>(_ query: PostgresQuery, as type: (repeat each Column).Type)
        async throws -> (repeat each Column)?
    {
        for try await row in try await self.query(query, logger: .silent) {
            return try row.decode((repeat each Column).self)
        }
        return nil
    }
}
