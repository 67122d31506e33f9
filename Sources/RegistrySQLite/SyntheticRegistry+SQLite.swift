import AudienceEngine
import Foundation
import GRDB
import Registry

extension SyntheticRegistry {
    /// Fills `database` (which must have no projects) with one project and the synthetic data.
    /// - Parameter progress: told the rows written so far, of ``rowCount()``, now and then.
    /// - Returns: the project and its server key.
    public func generate(
        into store: SQLiteStore, projectId: String = "bench", senderId: String = "200000000000",
        progress: @escaping @Sendable (Int) -> Void = { _ in }
    )
        async throws -> (Project, serverKey: String)
    {
        let database = store.database
        let registry = try await RegistryService(store: store)
        let (project, key) = try await registry.createProject(projectId: projectId, senderId: senderId)
        var random = SplitMix64(seed: seed)
        let (tokens, topics, seed) = (tokens, topics, seed)
        let sizes = topicSizes()
        let now = Int64(Date().timeIntervalSince1970 * 1000)
        try await database.writer.write { db in
            let insertToken = try db.makeStatement(
                sql:
                    "INSERT INTO token (id, projectId, value, state, createdAt, updatedAt) VALUES (?, ?, ?, 'registered', ?, ?)"
            )
            for id in 1...tokens {
                try insertToken.execute(arguments: [id, project.rowID, Self.tokenValue(seed: seed, id: id), now, now])
                if id % Self.progressStep == 0 { progress(id) }
            }
            let insertTopic = try db.makeStatement(
                sql: "INSERT INTO topic (id, projectId, name, createdAt) VALUES (?, ?, ?, ?)")
            for id in 1...topics {
                try insertTopic.execute(arguments: [id, project.rowID, "topic-\(id)", now])
            }
        }
        var written = tokens + topics
        progress(written)
        try await database.writer.writeWithoutTransaction { db in
            try db.execute(sql: "DROP INDEX subscription_tokenId")
        }
        // One transaction per batch of topics keeps the WAL small.
        for batch in stride(from: 0, to: topics, by: 500) {
            let range = batch..<min(batch + 500, topics)
            var rows: [(Int, [Int])] = []
            for topic in range {
                rows.append((topic + 1, Self.sample(sizes[topic], from: tokens, using: &random)))
            }
            let chunk = rows
            try await database.writer.write { db in
                let insert = try db.makeStatement(
                    sql: "INSERT INTO subscription (topicId, tokenId, createdAt) VALUES (?, ?, ?)")
                for (topic, members) in chunk {
                    for token in members {
                        try insert.execute(arguments: [topic, token, now])
                    }
                }
            }
            written += chunk.reduce(0) { $0 + $1.1.count }
            progress(written)
        }
        try await database.writer.writeWithoutTransaction { db in
            try db.execute(sql: "CREATE INDEX subscription_tokenId ON subscription(tokenId)")
            try db.execute(sql: "ANALYZE")
        }
        // The rows above bypassed the feed: tell every follower to reload.
        try await database.writer.write { db in _ = try ChangeFeedSQL.insert([.reset], db, now: now) }
        return (project, key)
    }
}
