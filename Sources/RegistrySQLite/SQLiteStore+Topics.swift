import AudienceEngine
import Foundation
import GRDB
import Registry

extension SQLiteStore {
    public func subscribe(_ tokens: [String], to topic: String, topicLimit: Int, in project: Project) async throws
        -> Committed<[BatchOutcome]>
    {
        try await committing { db, log in
            let now = EpochMilliseconds.now()
            let topicID = try Self.topicIDCreating(db, topic, in: project, now: now)
            let exists = try db.cachedStatement(sql: "SELECT 1 FROM subscription WHERE topicId = ? AND tokenId = ?")
            let countTopics = try db.cachedStatement(sql: "SELECT COUNT(*) FROM subscription WHERE tokenId = ?")
            let insert = try db.cachedStatement(
                sql: "INSERT INTO subscription (topicId, tokenId, createdAt) VALUES (?, ?, ?)")
            var subscribed: [UInt32] = []
            let outcomes = try tokens.map { value -> BatchOutcome in
                let token = try db.tokenRowRegistering(value, in: project, now: now, log: log)
                guard token.state == .registered else { return .notFound }
                // A token registered just now has no topics: skip the look-ups.
                if !token.isNew {
                    if try Bool.fetchOne(exists, arguments: [topicID, token.id]) != nil { return .ok }
                    if try Int.fetchOne(countTopics, arguments: [token.id]) ?? 0 >= topicLimit { return .tooManyTopics }
                }
                try insert.execute(arguments: [topicID, token.id, now])
                subscribed.append(UInt32(token.id))
                return .ok
            }
            try Self.deleteTopicIfEmpty(db, id: topicID)
            log.record(.subscribed(project: project.rowID, topic: topic, tokens: subscribed))
            return outcomes
        }
    }

    public func unsubscribe(_ tokens: [String], from topic: String, in project: Project) async throws
        -> Committed<[BatchOutcome]>
    {
        try await committing { db, log in
            let topicID = try Self.topicID(db, topic, in: project)
            let delete = try db.cachedStatement(sql: "DELETE FROM subscription WHERE topicId = ? AND tokenId = ?")
            var unsubscribed: [UInt32] = []
            let outcomes = try tokens.map { value -> BatchOutcome in
                guard let token = try db.tokenRow(value, in: project) else { return .ok }
                guard token.state == .registered else { return .notFound }
                if let topicID {
                    try delete.execute(arguments: [topicID, token.id])
                    if db.changesCount > 0 { unsubscribed.append(UInt32(token.id)) }
                }
                return .ok
            }
            if let topicID { try Self.deleteTopicIfEmpty(db, id: topicID) }
            log.record(.unsubscribed(project: project.rowID, topic: topic, tokens: unsubscribed))
            return outcomes
        }
    }

    public func createSubscription(token: String, topic: String, topicLimit: Int, in project: Project) async throws
        -> Committed<SubscriptionInfo>
    {
        try await committing { db, log in
            let now = EpochMilliseconds.now()
            let row = try db.tokenRowRegistering(token, in: project, now: now, log: log)
            guard row.state == .registered else { throw RegistryError.tokenNotFound }
            let topicID = try Self.topicIDCreating(db, topic, in: project, now: now)
            if try Bool.fetchOne(
                db, sql: "SELECT 1 FROM subscription WHERE topicId = ? AND tokenId = ?", arguments: [topicID, row.id])
                != nil
            {
                throw RegistryError.subscriptionExists
            }
            let count = try Int.fetchOne(
                db, sql: "SELECT COUNT(*) FROM subscription WHERE tokenId = ?", arguments: [row.id])
            guard count ?? 0 < topicLimit else { throw RegistryError.tooManyTopics(limit: topicLimit) }
            try db.execute(
                sql: "INSERT INTO subscription (topicId, tokenId, createdAt) VALUES (?, ?, ?)",
                arguments: [topicID, row.id, now])
            log.record(.subscribed(project: project.rowID, topic: topic, tokens: [UInt32(row.id)]))
            return SubscriptionInfo(token: token, topic: topic, createdAt: EpochMilliseconds.date(now))
        }
    }

    public func deleteSubscription(token: String, topic: String, in project: Project) async throws -> Committed<Bool> {
        try await committing { db, log in
            guard let row = try db.tokenRow(token, in: project), let topicID = try Self.topicID(db, topic, in: project)
            else { return false }
            try db.execute(
                sql: "DELETE FROM subscription WHERE topicId = ? AND tokenId = ?", arguments: [topicID, row.id])
            let deleted = db.changesCount > 0
            try Self.deleteTopicIfEmpty(db, id: topicID)
            if deleted { log.record(.unsubscribed(project: project.rowID, topic: topic, tokens: [UInt32(row.id)])) }
            return deleted
        }
    }

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
            guard let row = try db.tokenRow(token, in: project), row.state == .registered else { return nil }
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

    // MARK: - Helpers

    static func topicID(_ db: Database, _ name: String, in project: Project) throws -> Int64? {
        let statement = try db.cachedStatement(sql: "SELECT id FROM topic WHERE projectId = ? AND name = ?")
        return try Int64.fetchOne(statement, arguments: [project.rowID, name])
    }

    /// The topic's id, creating the topic first: subscribing to a topic that does not exist creates it, as in FCM.
    static func topicIDCreating(_ db: Database, _ name: String, in project: Project, now: Int64) throws -> Int64 {
        if let id = try topicID(db, name, in: project) { return id }
        try db.execute(
            sql: "INSERT INTO topic (projectId, name, createdAt) VALUES (?, ?, ?)",
            arguments: [project.rowID, name, now])
        return db.lastInsertedRowID
    }

    /// A topic exists while it has subscribers.
    static func deleteTopicIfEmpty(_ db: Database, id: Int64) throws {
        let statement = try db.cachedStatement(
            sql: "DELETE FROM topic WHERE id = ? AND NOT EXISTS (SELECT 1 FROM subscription WHERE topicId = ?)")
        try statement.execute(arguments: [id, id])
    }
}

extension SQLiteStore {
    public func setTopics(_ topics: [String], ofToken token: String, topicLimit: Int, in project: Project) async throws
        -> Committed<TopicChanges>
    {
        try await committing { db, log in
            let now = EpochMilliseconds.now()
            let row = try db.tokenRowRegistering(token, in: project, now: now, log: log)
            guard row.state == .registered else { throw RegistryError.tokenNotFound }
            guard topics.count <= topicLimit else { throw RegistryError.tooManyTopics(limit: topicLimit) }
            let current = try Row.fetchAll(
                db,
                sql:
                    "SELECT topic.id, topic.name FROM subscription JOIN topic ON topic.id = subscription.topicId WHERE tokenId = ?",
                arguments: [row.id])
            let currentNames = Set(current.map { $0["name"] as String })
            let wanted = Set(topics)
            let removed = current.filter { !wanted.contains($0["name"] as String) }
            for topic in removed {
                try db.execute(
                    sql: "DELETE FROM subscription WHERE topicId = ? AND tokenId = ?",
                    arguments: [topic["id"] as Int64, row.id])
                try Self.deleteTopicIfEmpty(db, id: topic["id"])
                log.record(.unsubscribed(project: project.rowID, topic: topic["name"], tokens: [UInt32(row.id)]))
            }
            let added = topics.filter { !currentNames.contains($0) }
            for name in added {
                let topicID = try Self.topicIDCreating(db, name, in: project, now: now)
                try db.execute(
                    sql: "INSERT INTO subscription (topicId, tokenId, createdAt) VALUES (?, ?, ?)",
                    arguments: [topicID, row.id, now])
                log.record(.subscribed(project: project.rowID, topic: name, tokens: [UInt32(row.id)]))
            }
            return TopicChanges(added: added.sorted(), removed: removed.map { $0["name"] as String }.sorted())
        }
    }
}
