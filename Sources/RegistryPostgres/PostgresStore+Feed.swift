import AudienceEngine
import Crypto
import Foundation
import Logging
import PostgresNIO
import Registry

/// The change feed over PostgreSQL, read by every server to keep its audience index equal to the
/// tables. Positions are handed out in commit order without gaps (`PostgresFeed`), so, as on
/// SQLite, a reader's cursor is a watermark: every change up to it has been read.
extension PostgresStore: ChangeFeed {
    public func loadAudience() async throws -> AudienceLoad {
        // One snapshot: the tables and the feed position are one consistent state.
        try await snapshotRead { connection in
            let position = try await connection.one(#"SELECT next FROM "audienceFeed" WHERE id = 1"#, as: Int64.self)
            var projects: [Int64: (topics: [String: [UInt32]], registered: [UInt32])] = [:]
            for try await project in try await connection.query("SELECT id FROM project", logger: .silent).decode(Int64.self) {
                projects[project] = ([:], [])
            }
            for try await (project, name, bytes) in try await connection.query(
                #"""
                SELECT topic."projectId", topic.name,
                       (SELECT string_agg(int4send(s."tokenId"), ''::bytea ORDER BY s."tokenId") FROM subscription s WHERE s."topicId" = topic.id)
                FROM topic
                """#, logger: .silent
            ).decode((Int64, String, Data?).self) {
                projects[project, default: ([:], [])].topics[name] = Self.bigEndianIDs(bytes)
            }
            for try await (project, bytes) in try await connection.query(
                #"""
                SELECT "projectId", string_agg(int4send(id), ''::bytea ORDER BY id) FROM token
                WHERE state = 'registered' GROUP BY "projectId"
                """#, logger: .silent
            ).decode((Int64, Data?).self) {
                projects[project, default: ([:], [])].registered = Self.bigEndianIDs(bytes)
            }
            return AudienceLoad(projects: projects, cursor: FeedCursor(watermark: position))
        }
    }

    public func changes(after cursor: FeedCursor, limit: Int) async throws -> FeedRead {
        try await snapshotRead { connection in
            let prunedThrough = try await connection.one(
                #"SELECT "prunedThrough" FROM "audienceFeed" WHERE id = 1"#, as: Int64.self)
            guard cursor.watermark >= prunedThrough else {
                return FeedRead(entries: [], truncated: true, next: cursor)
            }
            var entries: [FeedEntry] = []
            for try await (position, project, kind, topic, bytes) in try await connection.query(
                #"""
                SELECT position, "projectId", kind, topic, "tokenIds" FROM "audienceChange"
                WHERE position > \#(cursor.watermark) ORDER BY position LIMIT \#(limit)
                """#, logger: .silent
            ).decode((Int64, Int64, String, String?, Data).self) {
                entries.append(
                    FeedEntry(id: position, change: PostgresFeed.change(project: project, kind: kind, topic: topic, tokens: [UInt8](bytes))))
            }
            return FeedRead(entries: entries, truncated: false, next: FeedCursor(watermark: entries.last?.id ?? cursor.watermark))
        }
    }

    public func head() async throws -> FeedCursor {
        try await client.withConnection { connection in
            FeedCursor(
                watermark: try await connection.one(
                    #"""
                    SELECT GREATEST(next, "prunedThrough") FROM "audienceFeed" WHERE id = 1
                    """#, as: Int64.self))
        }
    }

    public func fingerprint(at cursor: FeedCursor) async throws -> [UInt8]? {
        try await client.withConnection { connection in
            guard
                let (project, kind, topic, bytes, createdAt) = try await connection.first(
                    #"SELECT "projectId", kind, topic, "tokenIds", "createdAt" FROM "audienceChange" WHERE position = \#(cursor.watermark)"#,
                    as: (Int64, String, String?, Data, Int64).self)
            else { return nil }
            var hasher = SHA256()
            hasher.update(data: Array("\(cursor.watermark) \(project) \(kind) \(createdAt) ".utf8))
            hasher.update(data: Array((topic ?? "").utf8))
            hasher.update(data: bytes)
            return Array(hasher.finalize())
        }
    }

    /// Rung when any server commits a change: a connection of the pool LISTENs while the stream
    /// is read, and listens again after a lost connection. The follower's poll covers the gaps.
    public func wakeUps() -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let client = self.client
        let logger = self.logger
        let listener = Task {
            while !Task.isCancelled {
                do {
                    try await client.withConnection { connection in
                        try await connection.listen(on: PostgresFeed.channel) { notifications in
                            // Anything may have been missed while not listening.
                            continuation.yield()
                            for try await _ in notifications { continuation.yield() }
                        }
                    }
                } catch {
                    if Task.isCancelled { break }
                    logger.notice("listening for feed notifications failed; listening again in 1 s")
                    try? await Task.sleep(for: .seconds(1))
                }
            }
        }
        continuation.onTermination = { _ in listener.cancel() }
        return stream
    }

    /// Runs `body` in a read-only REPEATABLE READ transaction: every statement sees one snapshot,
    /// the same the frontier is taken from.
    func snapshotRead<Value: Sendable>(_ body: (PostgresConnection) async throws -> Value) async throws -> Value {
        try await client.withConnection { connection in
            try await connection.run("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
            do {
                let value = try await body(connection)
                try await connection.run("COMMIT")
                return value
            } catch {
                try? await connection.run("ROLLBACK")
                throw error
            }
        }
    }

    /// `int4send` gives big-endian 32-bit integers.
    static func bigEndianIDs(_ bytes: Data?) -> [UInt32] {
        guard let bytes else { return [] }
        let raw = [UInt8](bytes)
        return stride(from: 0, to: raw.count - 3, by: 4).map { i in
            UInt32(raw[i]) << 24 | UInt32(raw[i + 1]) << 16 | UInt32(raw[i + 2]) << 8 | UInt32(raw[i + 3])
        }
    }
}

extension PostgresFeed {
    static func change(project: Int64, kind: String, topic: String?, tokens: [UInt8]) -> AudienceChange {
        let ids = TokenIDList.decode(tokens)
        switch kind {
        case "subscribed": return .subscribed(project: project, topic: topic ?? "", tokens: ids)
        case "unsubscribed": return .unsubscribed(project: project, topic: topic ?? "", tokens: ids)
        case "registered": return .registered(project: project, tokens: ids)
        case "unregistered": return .unregistered(project: project, tokens: ids)
        default: return .reset
        }
    }
}
