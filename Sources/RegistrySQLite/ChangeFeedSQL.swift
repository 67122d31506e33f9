import AudienceEngine
import Crypto
import Foundation
import GRDB
import Registry

/// The change feed in SQL: the `audienceChange` rows every write adds in its own transaction, and
/// the `audienceFeed` row that says how far the feed has been pruned.
enum ChangeFeedSQL {
    /// Inserts `changes` in order; returns them with their positions.
    static func insert(_ changes: [AudienceChange], _ db: Database, now: Int64) throws -> [FeedEntry] {
        let statement = try db.cachedStatement(
            sql: "INSERT INTO audienceChange (projectId, kind, topic, tokenIds, createdAt) VALUES (?, ?, ?, ?, ?)")
        return try changes.map { change in
            let row = FeedRow(change)
            try statement.execute(arguments: [row.project, row.kind, row.topic, Data(row.tokenIDs), now])
            return FeedEntry(id: db.lastInsertedRowID, change: change)
        }
    }

    /// Entries after `position`, oldest first; `truncated` when some of them were pruned.
    static func read(_ db: Database, after position: Int64, limit: Int) throws -> FeedRead {
        let prunedThrough =
            try Int64.fetchOne(db.cachedStatement(sql: "SELECT prunedThrough FROM audienceFeed WHERE id = 1")) ?? 0
        guard position >= prunedThrough else {
            return FeedRead(entries: [], truncated: true, next: FeedCursor(watermark: position))
        }
        let rows = try Row.fetchAll(
            db.cachedStatement(
                sql: "SELECT id, projectId, kind, topic, tokenIds FROM audienceChange WHERE id > ? ORDER BY id LIMIT ?"),
            arguments: [position, limit])
        let entries = rows.map { row in
            FeedEntry(
                id: row["id"],
                change: FeedRow(
                    project: row["projectId"], kind: row["kind"], topic: row["topic"],
                    tokenIDs: [UInt8](row["tokenIds"] as Data)
                ).change)
        }
        return FeedRead(
            entries: entries, truncated: false, next: FeedCursor(watermark: entries.last?.id ?? position))
    }

    /// A SHA-256 of the entry with id `id` (its kind, project, topic, tokens and time), or `nil`
    /// when there is none.
    static func fingerprint(_ db: Database, of id: Int64) throws -> [UInt8]? {
        guard
            let row = try Row.fetchOne(
                db, sql: "SELECT projectId, kind, topic, tokenIds, createdAt FROM audienceChange WHERE id = ?",
                arguments: [id])
        else { return nil }
        var hasher = SHA256()
        hasher.update(data: Array("\(id) \(row["projectId"] as Int64) \(row["kind"] as String) \(row["createdAt"] as Int64) ".utf8))
        hasher.update(data: Array((row["topic"] as String? ?? "").utf8))
        hasher.update(data: [UInt8](row["tokenIds"] as Data))
        return Array(hasher.finalize())
    }

    /// The newest position: the last entry, or the pruning mark when the feed is empty.
    static func head(_ db: Database) throws -> Int64 {
        try Int64.fetchOne(
            db,
            sql: """
                SELECT MAX(COALESCE((SELECT MAX(id) FROM audienceChange), 0),
                           (SELECT prunedThrough FROM audienceFeed WHERE id = 1))
                """) ?? 0
    }

    /// Keeps the newest `retention` entries.
    static func prune(_ db: Database, keeping retention: Int) throws {
        let cut = try head(db) - Int64(retention)
        guard cut > 0 else { return }
        try db.cachedStatement(sql: "DELETE FROM audienceChange WHERE id <= ?").execute(arguments: [cut])
        guard db.changesCount > 0 else { return }
        try db.cachedStatement(sql: "UPDATE audienceFeed SET prunedThrough = MAX(prunedThrough, ?) WHERE id = 1")
            .execute(arguments: [cut])
    }
}
