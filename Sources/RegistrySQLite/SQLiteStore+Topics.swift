import AudienceEngine
import Foundation
import GRDB
import Registry

extension SQLiteStore {
    public func subscription(token: String, topic: String, in project: Project) async throws -> SubscriptionInfo? {
        try await read { db in
            try Int64.fetchOne(
                db,
                sql: """
                    SELECT subscription.createdAt FROM subscription
                    JOIN token ON token.id = subscription.tokenId
                    JOIN topic ON topic.id = subscription.topicId
                    WHERE token.projectId = ? AND token.value = ? AND topic.projectId = ? AND topic.name = ?
                    """, arguments: [project.rowID, token, project.rowID, topic]
            ).map { SubscriptionInfo(token: token, topic: topic, createdAt: EpochMilliseconds.date($0)) }
        }
    }

    public func subscriptions(ofToken token: String, in project: Project, after: String?, limit: Int) async throws
        -> Page<SubscriptionInfo>?
    {
        try await read { db in
            guard let row = try SQLiteWriteDriver(db: db).token(token, in: project.rowID), row.state == .registered
            else { return nil }
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT topic.name, subscription.createdAt FROM subscription
                    JOIN topic ON topic.id = subscription.topicId
                    WHERE subscription.tokenId = ? AND topic.name > ?
                    ORDER BY topic.name LIMIT ?
                    """, arguments: [row.id, after ?? "", limit + 1])
            let items = rows.prefix(limit).map {
                SubscriptionInfo(token: token, topic: $0["name"], createdAt: EpochMilliseconds.date($0["createdAt"]))
            }
            return Page(items: Array(items), nextAfter: rows.count > limit ? items.last?.topic : nil)
        }
    }

    public func topics(in project: Project, prefix: String, after: String?, limit: Int) async throws
        -> Page<TopicSummary>
    {
        let names = NameRange(prefix: prefix, after: after)
        return try await read { db in
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT name, createdAt, (SELECT COUNT(*) FROM subscription WHERE topicId = topic.id) AS subscribers
                    FROM topic WHERE projectId = ? AND \(names.sql) ORDER BY name LIMIT ?
                    """, arguments: [project.rowID] + names.arguments + [limit + 1])
            let items = rows.prefix(limit).map {
                TopicSummary(
                    name: $0["name"], subscriberCount: $0["subscribers"], createdAt: EpochMilliseconds.date($0["createdAt"]))
            }
            return Page(items: Array(items), nextAfter: rows.count > limit ? items.last?.name : nil)
        }
    }

    public func topicCreationTimes(_ names: [String], in project: Project) async throws -> [String: Date] {
        guard !names.isEmpty else { return [:] }
        // One statement for the page's names, as a JSON array, as the other look-ups by list do.
        let list = try Self.jsonList(names)
        return try await read { db in
            var times: [String: Date] = [:]
            let rows = try Row.fetchCursor(
                db.cachedStatement(
                    sql: "SELECT name, createdAt FROM topic WHERE projectId = ? AND name IN (SELECT value FROM json_each(?))"),
                arguments: [project.rowID, list])
            while let row = try rows.next() { times[row["name"]] = EpochMilliseconds.date(row["createdAt"]) }
            return times
        }
    }

    public func topicSubscribers(named name: String, in project: Project, after: String?, limit: Int) async throws
        -> (TopicSummary, Page<Membership>)?
    {
        try await read { db in
            try db.namedTokenSet(.topics, named: name, in: project, after: after, limit: limit).map { set, page in
                (TopicSummary(name: name, subscriberCount: set.count, createdAt: set.createdAt), page)
            }
        }
    }
}
