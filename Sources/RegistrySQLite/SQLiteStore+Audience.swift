import AudienceEngine
import Foundation
import GRDB
import Registry

/// The change feed over SQLite: ids are commit-ordered (one writer), so the cursor is only ever a
/// watermark, and a read under the write lock would see nothing a later read could not.
extension SQLiteStore: ChangeFeed {
    public func loadAudience() async throws -> AudienceLoad {
        // Two connections read the halves at once, each in its own read transaction. Every change
        // to what the index holds writes the feed in its own transaction, so halves read at one
        // feed position saw one state; when a write landed between their starts, read again.
        for _ in 0..<Self.concurrentLoadAttempts {
            async let subscriptions = read { db in try AudienceRows.subscriptions(db) }
            async let tokens = read { db in try AudienceRows.tokens(db) }
            let (members, described) = try await (subscriptions, tokens)
            if members.position == described.position { return AudienceRows.load(members, described) }
        }
        // Writes kept landing: one transaction reads both halves, one after the other.
        return try await read { db in AudienceRows.load(try AudienceRows.subscriptions(db), try AudienceRows.tokens(db)) }
    }

    /// How often the halves are read at once before one transaction reads them both.
    static let concurrentLoadAttempts = 2

    public func changes(after cursor: FeedCursor, limit: Int) async throws -> FeedRead {
        try await read { db in try ChangeFeedSQL.read(db, after: cursor.watermark, limit: limit) }
    }

    public func head() async throws -> FeedCursor {
        FeedCursor(watermark: try await read { db in try ChangeFeedSQL.head(db) })
    }

    public func fingerprint(at cursor: FeedCursor) async throws -> [UInt8]? {
        try await read { db in try ChangeFeedSQL.fingerprint(db, of: cursor.watermark) }
    }

    public func unread(after cursor: FeedCursor) async throws -> Int64 {
        max(0, try await head().watermark - cursor.watermark)
    }

    /// One writer at a time: ids are commit-ordered and gapless.
    public var idsFollowCommitOrder: Bool { true }

    public func wakeUps() -> AsyncStream<Void> {
        doorbell.listen()
    }
}

/// Token ids: the lookups a send and a page of an audience make.
extension SQLiteStore {
    public func tokenValues(ids: [UInt32], in project: Project) async throws -> [String] {
        guard !ids.isEmpty else { return [] }
        // One statement for the whole page: the ids travel as one JSON array, bound like any value.
        // SQLite looks the ids up in ascending order (the plan is rowid searches over the sorted
        // list, with no sort step), so the values come back in the order they are listed in.
        let arguments: StatementArguments = [project.rowID, Self.jsonList(ids)]
        return try await read { db in
            try String.fetchAll(
                db.cachedStatement(
                    sql: "SELECT value FROM token WHERE projectId = ? AND id IN (SELECT value FROM json_each(?)) ORDER BY id"),
                arguments: arguments)
        }
    }

    public func tokenIDs(_ tokens: [String], in project: Project) async throws -> [String: UInt32] {
        guard !tokens.isEmpty else { return [:] }
        // One statement for the whole list: the values travel as one JSON array, bound like any value.
        let list = try Self.jsonList(tokens)
        return try await read { db in
            var ids: [String: UInt32] = [:]
            let rows = try Row.fetchCursor(
                db.cachedStatement(
                    sql: """
                        SELECT id, value FROM token
                        WHERE projectId = ? AND state = 'registered' AND value IN (SELECT value FROM json_each(?))
                        """),
                arguments: [project.rowID, list])
            while let row = try rows.next() { ids[row["value"]] = UInt32(row["id"] as Int64) }
            return ids
        }
    }

    public func tokenID(_ token: String, in project: Project) async throws -> UInt32? {
        try await read { db in
            try Int64.fetchOne(
                db.cachedStatement(sql: "SELECT id FROM token WHERE projectId = ? AND value = ?"),
                arguments: [project.rowID, token]
            ).map { UInt32($0) }
        }
    }

    /// Driven by the list, one `(projectId, value)` index lookup per token and other project:
    /// token values have no index of their own.
    public func tokensOfOtherSenders(_ tokens: [String], notIn project: Project) async throws -> Set<String> {
        guard !tokens.isEmpty else { return [] }
        let list = try Self.jsonList(tokens)
        return try await read { db in
            Set(
                try String.fetchAll(
                    db.cachedStatement(
                        sql: """
                        SELECT DISTINCT listed.value FROM json_each(?2) AS listed
                        CROSS JOIN project AS other ON other.id != ?1
                        CROSS JOIN token ON token.projectId = other.id AND token.value = listed.value
                        WHERE token.state = 'registered'
                          AND NOT EXISTS (SELECT 1 FROM token AS own WHERE own.projectId = ?1 AND own.value = listed.value)
                        """),
                    arguments: [project.rowID, list]))
        }
    }

    public func memberIDs(ofGroup id: Int64?, named name: String?, in project: Project) async throws -> [UInt32]? {
        try await read { db in
            let groupID: Int64?
            if let id {
                groupID = try Int64.fetchOne(
                    db, sql: "SELECT id FROM deviceGroup WHERE id = ? AND projectId = ?",
                    arguments: [id, project.rowID])
            } else {
                groupID = try Int64.fetchOne(
                    db, sql: "SELECT id FROM deviceGroup WHERE name = ? AND projectId = ?",
                    arguments: [name, project.rowID])
            }
            guard let groupID else { return nil }
            return try Int64.fetchAll(
                db, sql: "SELECT tokenId FROM groupMember WHERE groupId = ? ORDER BY tokenId", arguments: [groupID]
            ).map { UInt32($0) }
        }
    }
}
