import AudienceEngine
import Crypto
import Foundation
import Logging
import PostgresNIO
import Registry
import Synchronization

/// The change feed over PostgreSQL, read by every server to keep its audience index equal to the
/// tables.
///
/// Positions are `transaction id << 20 | place` (`PostgresFeed`). A read takes, in one snapshot,
/// the entries after the cursor and the oldest transaction still running (`pg_snapshot_xmin`):
/// every position below that transaction's is final, so the watermark moves up to there and no
/// further; entries above it that are already visible are read too and kept in `seenAbove`, so a
/// long transaction delays nobody's changes, and one that commits late is read when it does.
/// What a read returns is in replay order, which puts two writes on one token in the order they
/// committed.
extension PostgresStore: ChangeFeed {
    public func loadAudience() async throws -> AudienceLoad {
        // One snapshot: the tables, the frontier and the entries past it are one consistent state.
        try await snapshotRead(bounded: false) { connection in
            let frontier = try await connection.frontier()
            var seen: [Int64] = []
            for try await position in try await connection.query(
                #"SELECT position FROM "audienceChange" WHERE position >= \#(frontier) ORDER BY position"#, logger: .silent
            ).decode(Int64.self) { seen.append(position) }
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
            // Every token once, by project and id: the registered ones, and what each says.
            var builders: [Int64: TokenAttributeIndex.Builder] = [:]
            var registered: [Int64: [UInt32]] = [:]
            for try await (project, id, isRegistered, platform, locale, timeZone, appVersion, seenAt) in try await connection
                .query(
                    #"""
                    SELECT "projectId", id, state = 'registered', platform, locale, "timeZone", "appVersion",
                           COALESCE("lastSeenAt", "updatedAt")
                    FROM token ORDER BY "projectId", id
                    """#, logger: .silent
                ).decode((Int64, Int64, Bool, String?, String?, String?, String?, Int64).self)
            {
                if isRegistered { registered[project, default: []].append(UInt32(id)) }
                builders[project, default: TokenAttributeIndex.Builder()].add(
                    UInt32(id), platform: platform, locale: locale, timeZone: timeZone, appVersion: appVersion,
                    seenDay: SeenDay.of(milliseconds: seenAt))
            }
            for (project, ids) in registered { projects[project, default: ([:], [])].registered = ids }
            return AudienceLoad(
                projects: projects, attributes: builders.mapValues { var builder = $0; return builder.finish() },
                cursor: FeedCursor(watermark: frontier - 1, seenAbove: seen))
        }
    }

    public func changes(after cursor: FeedCursor, limit: Int) async throws -> FeedRead {
        try await snapshotRead { connection in
            let prunedThrough = try await connection.one(
                #"SELECT "prunedThrough" FROM "audienceFeed" WHERE id = 1"#, as: Int64.self)
            guard cursor.watermark >= prunedThrough else {
                return FeedRead(entries: [], truncated: true, next: cursor)
            }
            let frontier = try await connection.frontier()
            var entries: [FeedEntry] = []
            var last: (order: Int64, position: Int64)?
            // `NOT IN` a subquery is hashed: linear in the cursor's seen list, however long it
            // grows while a long transaction holds the frontier back.
            for try await (position, order, project, kind, topic, bytes) in try await connection.query(
                #"""
                SELECT position, "replayOrder", "projectId", kind, topic, "tokenIds" FROM "audienceChange"
                WHERE position > \#(cursor.watermark) AND position NOT IN (SELECT unnest(\#(cursor.seenAbove)::bigint[]))
                ORDER BY "replayOrder", position LIMIT \#(limit)
                """#, logger: .silent
            ).decode((Int64, Int64, Int64, String, String?, Data).self) {
                let row = FeedRow(project: project, kind: kind, topic: topic, tokenIDs: [UInt8](bytes))
                entries.append(FeedEntry(id: position, change: row.change))
                last = (order, position)
            }
            // A full page may leave visible entries unread, below positions it read: the watermark
            // stops short of the lowest of them.
            var firstUnread: Int64?
            if entries.count == limit, let last {
                firstUnread = try await connection.one(
                    #"""
                    SELECT MIN(position) FROM "audienceChange"
                    WHERE position > \#(cursor.watermark) AND position NOT IN (SELECT unnest(\#(cursor.seenAbove)::bigint[]))
                      AND ("replayOrder", position) > (\#(last.order), \#(last.position))
                    """#, as: Int64?.self)
            }
            return FeedRead(
                entries: entries, truncated: false,
                next: Self.cursor(after: cursor, read: entries, frontier: frontier, firstUnread: firstUnread))
        }
    }

    /// Where a reader stands after reading `entries` past `cursor`, when every position below
    /// `frontier` is final and `firstUnread` is the lowest visible position the read left.
    static func cursor(after cursor: FeedCursor, read entries: [FeedEntry], frontier: Int64, firstUnread: Int64?)
        -> FeedCursor
    {
        let watermark = max(cursor.watermark, min(frontier - 1, (firstUnread ?? Int64.max) - 1))
        let seen = (cursor.seenAbove + entries.map(\.id)).filter { $0 > watermark }.sorted()
        return FeedCursor(watermark: watermark, seenAbove: seen)
    }

    /// The cursor of a reader that has read everything committed: the frontier now.
    public func head() async throws -> FeedCursor {
        try await snapshotRead { connection in
            let prunedThrough = try await connection.one(
                #"SELECT "prunedThrough" FROM "audienceFeed" WHERE id = 1"#, as: Int64.self)
            return FeedCursor(watermark: max(try await connection.frontier() - 1, prunedThrough))
        }
    }

    public func unread(after cursor: FeedCursor) async throws -> Int64 {
        try await database.withConnection { connection in
            try await connection.one(
                #"""
                SELECT COUNT(*)::bigint FROM "audienceChange"
                WHERE position > \#(cursor.watermark) AND position NOT IN (SELECT unnest(\#(cursor.seenAbove)::bigint[]))
                """#, as: Int64.self)
        }
    }

    /// Several servers write at once: ids are transaction ids, not commit order.
    public var idsFollowCommitOrder: Bool { false }

    /// A fingerprint of the newest entry at or below the cursor's watermark: positions there are
    /// final, so the same cursor finds the same entry until it is pruned.
    public func fingerprint(at cursor: FeedCursor) async throws -> [UInt8]? {
        try await database.withConnection { connection in
            guard
                let (position, project, kind, topic, bytes, createdAt) = try await connection.first(
                    #"""
                    SELECT position, "projectId", kind, topic, "tokenIds", "createdAt" FROM "audienceChange"
                    WHERE position <= \#(cursor.watermark) ORDER BY position DESC LIMIT 1
                    """#,
                    as: (Int64, Int64, String, String?, Data, Int64).self)
            else { return nil }
            var hasher = SHA256()
            hasher.update(data: Array("\(position) \(project) \(kind) \(createdAt) ".utf8))
            hasher.update(data: Array((topic ?? "").utf8))
            hasher.update(data: bytes)
            return Array(hasher.finalize())
        }
    }

    /// Rung when any server commits a change: a connection of the pool LISTENs while the stream
    /// is read, and listens again after a lost connection. The follower's poll covers the gaps.
    ///
    /// A connection lost without a word would leave the listener waiting for ever, so every
    /// `listenCheckInterval` the listening connection must answer `SELECT 1` within
    /// `listenCheckDeadline`, or it is given up and another is leased. A failure is logged once,
    /// until listening works again.
    public func wakeUps() -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        let database = self.database
        let logger = self.logger
        let listener = Task {
            let failing = FailureFlag()
            while !Task.isCancelled {
                do {
                    try await database.withConnection(bounded: false) { connection in
                        try await connection.listen(on: PostgresFeed.channel) { notifications in
                            // Anything may have been missed while not listening.
                            continuation.yield()
                            if failing.clear() { logger.notice("listening for feed notifications again") }
                            let relay = Task { for try await _ in notifications { continuation.yield() } }
                            defer { relay.cancel() }
                            while true {
                                try await Task.sleep(for: Self.listenCheckInterval)
                                do {
                                    try await withDeadline(Self.listenCheckDeadline, "checking the listening connection") {
                                        try await connection.run("SELECT 1")
                                    }
                                } catch {
                                    // Not back to the pool: a connection that does not answer is closed.
                                    if !Task.isCancelled { connection.close().whenComplete { _ in } }
                                    throw error
                                }
                            }
                        }
                    }
                } catch {
                    if Task.isCancelled { break }
                    if failing.set() {
                        logger.notice(
                            "listening for feed notifications failed; trying again every second (the feed is polled meanwhile)",
                            metadata: ["cause": "\(DatabasePool.summary(of: error))"])
                    }
                    try? await Task.sleep(for: .seconds(1))
                }
            }
        }
        continuation.onTermination = { _ in listener.cancel() }
        return stream
    }

    static let listenCheckInterval = Duration.seconds(5)
    static let listenCheckDeadline = Duration.seconds(3)

    public func ping() async throws {
        try await database.withConnection { connection in try await connection.run("SELECT 1") }
    }

    /// Runs `body` in a read-only REPEATABLE READ transaction: every statement sees one snapshot,
    /// the same the frontier is taken from.
    /// - Parameter bounded: false for reads of the whole registry (the audience load, an export),
    ///   which may take longer than a request's `DatabasePool.statementDeadline`.
    func snapshotRead<Value: Sendable>(
        bounded: Bool = true, _ body: @escaping @Sendable (PostgresConnection) async throws -> Value
    ) async throws -> Value {
        try await database.withConnection(bounded: bounded) { connection in
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

/// Whether a loop is failing, so that it logs its first failure and its recovery, not every try.
final class FailureFlag: Sendable {
    private let failing = Atomic<Bool>(false)

    /// Marks it failing; true if it was not.
    func set() -> Bool {
        !failing.exchange(true, ordering: .relaxed)
    }

    /// Marks it working; true if it was failing.
    func clear() -> Bool {
        failing.exchange(false, ordering: .relaxed)
    }
}

extension PostgresConnection {
    /// The lowest position a transaction still running may write: every position below it is
    /// final. Read inside `snapshotRead`, it is the frontier of that read's snapshot.
    func frontier() async throws -> Int64 {
        try await one("SELECT pg_snapshot_xmin(pg_current_snapshot())::text::bigint", as: Int64.self)
            << PostgresFeed.placeBits
    }
}
