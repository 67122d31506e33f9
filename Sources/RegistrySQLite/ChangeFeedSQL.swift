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
            let (project, kind, topic, tokens) = columns(of: change)
            try statement.execute(arguments: [project, kind, topic, Data(TokenIDList.encode(tokens)), now])
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
                change: change(
                    project: row["projectId"], kind: row["kind"], topic: row["topic"],
                    tokens: [UInt8](row["tokenIds"] as Data)))
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

    // MARK: - Rows

    private static func columns(of change: AudienceChange) -> (Int64, String, String?, [UInt32]) {
        switch change {
        case .subscribed(let project, let topic, let tokens): (project, "subscribed", topic, tokens)
        case .unsubscribed(let project, let topic, let tokens): (project, "unsubscribed", topic, tokens)
        case .registered(let project, let tokens): (project, "registered", nil, tokens)
        case .unregistered(let project, let tokens): (project, "unregistered", nil, tokens)
        case .reset: (0, "reset", nil, [])
        }
    }

    private static func change(project: Int64, kind: String, topic: String?, tokens: [UInt8]) -> AudienceChange {
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
