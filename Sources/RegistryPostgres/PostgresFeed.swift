import AudienceEngine
import Foundation
import PostgresNIO
import Registry

/// The change feed's writing side on PostgreSQL: the `audienceChange` rows a write adds in its
/// own transaction. The doorbell rings after the commit (`FeedDoorbell`).
enum PostgresFeed {
    /// The NOTIFY channel every server listens on. The payload is empty: only that something
    /// committed matters, and readers read the table.
    static let channel = "fcm_registry_feed"

    /// Bits of a position below the transaction id: a write records at most 2^20 - 1 changes.
    static let placeBits: Int64 = 20

    /// Inserts `changes` in order; returns them with their positions. `committing` rings the
    /// doorbell once the write has committed.
    ///
    /// A position is `transaction id << 20 | place`: every transaction below the oldest one still
    /// running has ended, so a reader knows which positions are final (`PostgresStore+Feed`).
    /// Transaction ids are taken early, though, at a write's first lock, so two writes on one token
    /// can commit in the other order than their ids. Each write therefore also takes one
    /// "replayOrder" from a sequence, here, as its last step: after every lock it holds, so a write
    /// that waited for another takes it after the other committed. Readers apply what they read in
    /// replay order, which is commit order wherever the order matters.
    ///
    /// No lock is shared by all writes: concurrent commits share WAL flushes (PostgreSQL's own
    /// group commit), on every server at once. Nor is NOTIFY's lock, taken after the commit
    /// (`FeedDoorbell`).
    static func insert(
        _ changes: [AudienceChange], _ connection: PostgresConnection, now: Int64, retention: Int
    ) async throws -> [FeedEntry] {
        guard !changes.isEmpty else { return [] }
        guard changes.count < 1 << placeBits else {
            throw PostgresStoreError("a write of \(changes.count) audience changes: at most \((1 << placeBits) - 1) are kept")
        }
        var projects: [Int64] = [], kinds: [String] = [], topics: [String] = [], tokenLists: [ByteBuffer] = []
        for change in changes {
            let row = FeedRow(change)
            projects.append(row.project)
            kinds.append(row.kind)
            topics.append(row.topic ?? "")
            tokenLists.append(ByteBuffer(bytes: row.tokenIDs))
        }
        // One statement, one round trip: the write's order and every change. The doorbell rings
        // after the commit (`FeedDoorbell`): a NOTIFY in the write would take PostgreSQL's one
        // notification lock through the write's commit, and commits would queue on it again.
        let taken = try await connection.first(
            #"""
            WITH taken AS (
              SELECT pg_current_xact_id()::text::bigint << \#(Int32(placeBits)) AS base,
                     nextval('"audienceChange_replayOrder"') AS "order"
            ), inserted AS (
              INSERT INTO "audienceChange" (position, "replayOrder", "projectId", kind, topic, "tokenIds", "createdAt")
              SELECT taken.base | change.place, taken."order", change.project, change.kind,
                     NULLIF(change.topic, ''), change.tokens, \#(now)
              FROM taken,
                   unnest(\#(projects)::bigint[], \#(kinds)::text[], \#(topics)::text[], \#(tokenLists)::bytea[])
                     WITH ORDINALITY AS change(project, kind, topic, tokens, place)
            )
            SELECT taken.base, taken."order" FROM taken
            """#, as: (Int64, Int64).self)
        guard let (base, order) = taken else { throw PostgresStoreError("the feed's insert returned no row") }
        // Keep about the newest `retention` writes' entries: pruned by the write whose order
        // crosses a thousand. The mark is the highest position pruned: a reader whose watermark is
        // below it may have missed an entry, and reloads. Only final positions go, below the
        // frontier: a reader whose frontier a long transaction holds back is never told it missed
        // what it read.
        if order % 1000 == 0, order > Int64(retention) {
            let frontier = try await connection.frontier()
            try await connection.run(
                #"""
                WITH pruned AS (
                  DELETE FROM "audienceChange"
                  WHERE "replayOrder" <= \#(order - Int64(retention)) AND position < \#(frontier)
                  RETURNING position
                )
                UPDATE "audienceFeed" SET "prunedThrough" = GREATEST("prunedThrough", (SELECT MAX(position) FROM pruned))
                WHERE id = 1
                """#)
        }
        return changes.indices.map { FeedEntry(id: base | Int64($0 + 1), change: changes[$0]) }
    }
}

extension PostgresStore {
    /// Runs `body` as one all-or-nothing write; what it records in the log goes to the change
    /// feed in the same transaction, and comes back with its value.
    func committing<Value: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection, ChangeLog) async throws -> Value,
        onUniqueViolation: (() -> any Error)? = nil
    ) async throws -> Committed<Value> {
        let committed = try await transaction({ connection in
            let log = ChangeLog()
            let value = try await body(connection, log)
            let entries = try await PostgresFeed.insert(
                log.changes, connection, now: EpochMilliseconds.now(), retention: feedRetention)
            return Committed(value, changes: entries)
        }, onUniqueViolation: onUniqueViolation)
        if !committed.changes.isEmpty { doorbell.ring() }
        return committed
    }
}

/// A token's row as writes need it.
struct PostgresTokenRow {
    var id: Int32
    var state: TokenState
    /// Registered by this very write.
    var isNew: Bool
}

extension PostgresConnection {
    func lockedToken(_ value: String, in project: Int64) async throws -> PostgresTokenRow? {
        for try await (id, state) in try await query(
            #"SELECT id, state FROM token WHERE "projectId" = \#(project) AND value = \#(value) FOR NO KEY UPDATE"#,
            logger: .silent
        ).decode((Int32, String).self) {
            return PostgresTokenRow(id: id, state: TokenState(rawValue: state) ?? .registered, isNew: false)
        }
        return nil
    }

    /// The token's row, locked, inserted first if the project has never seen it (`isNew`).
    func lockedTokenRegistering(_ value: String, in project: Int64, now: Int64) async throws -> PostgresTokenRow {
        // Insert first: a new token costs one statement, a known one two. A concurrent insert of
        // the same token waits on the unique index, then does nothing.
        for try await id in try await query(
            #"""
            INSERT INTO token ("projectId", value, state, "createdAt", "updatedAt")
            VALUES (\#(project), \#(value), 'registered', \#(now), \#(now))
            ON CONFLICT ("projectId", value) DO NOTHING RETURNING id
            """#, logger: .silent
        ).decode(Int32.self) {
            return PostgresTokenRow(id: id, state: .registered, isNew: true)
        }
        guard let row = try await lockedToken(value, in: project) else {
            throw PostgresStoreError("token \(value.count)-character value neither inserted nor found")
        }
        return row
    }
}
