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
            try statement.execute(arguments: [project, kind, topic, Data(encode(tokens)), now])
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
        let ids = decode(tokens)
        switch kind {
        case "subscribed": return .subscribed(project: project, topic: topic ?? "", tokens: ids)
        case "unsubscribed": return .unsubscribed(project: project, topic: topic ?? "", tokens: ids)
        case "registered": return .registered(project: project, tokens: ids)
        case "unregistered": return .unregistered(project: project, tokens: ids)
        default: return .reset
        }
    }

    /// Token ids as little-endian 32-bit integers.
    static func encode(_ ids: [UInt32]) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(ids.count * 4)
        for id in ids {
            bytes.append(UInt8(truncatingIfNeeded: id))
            bytes.append(UInt8(truncatingIfNeeded: id >> 8))
            bytes.append(UInt8(truncatingIfNeeded: id >> 16))
            bytes.append(UInt8(truncatingIfNeeded: id >> 24))
        }
        return bytes
    }

    static func decode(_ bytes: [UInt8]) -> [UInt32] {
        stride(from: 0, to: bytes.count - 3, by: 4).map { i in
            UInt32(bytes[i]) | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2]) << 16 | UInt32(bytes[i + 3]) << 24
        }
    }
}

/// What one request's writes changed, collected inside its savepoint and written to the feed
/// at its end, so that a request rolled back leaves no entry.
final class ChangeLog {
    private(set) var changes: [AudienceChange] = []

    /// Records a change, merging it into the previous one when both say the same of more tokens
    /// (a batch of new tokens is one `registered` entry, not a thousand).
    func record(_ change: AudienceChange) {
        switch (changes.last, change) {
        case (.registered(let p, _), .registered(let q, let more)) where p == q:
            // Taken off the array first, so the token list is appended to in place.
            guard case .registered(_, var tokens) = changes.removeLast() else { return }
            tokens.append(contentsOf: more)
            changes.append(.registered(project: p, tokens: tokens))
        case (.unregistered(let p, _), .unregistered(let q, let more)) where p == q:
            guard case .unregistered(_, var tokens) = changes.removeLast() else { return }
            tokens.append(contentsOf: more)
            changes.append(.unregistered(project: p, tokens: tokens))
        default:
            switch change {
            case .subscribed(_, _, let tokens), .unsubscribed(_, _, let tokens), .registered(_, let tokens),
                .unregistered(_, let tokens):
                if tokens.isEmpty { return }
            case .reset: break
            }
            changes.append(change)
        }
    }
}
