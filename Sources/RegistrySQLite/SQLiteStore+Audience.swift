import AudienceEngine
import Foundation
import GRDB
import Registry

/// The change feed over SQLite: ids are commit-ordered (one writer), so the cursor is only ever a
/// watermark, and a read under the write lock would see nothing a later read could not.
extension SQLiteStore: ChangeFeed {
    public func loadAudience() async throws -> AudienceLoad {
        // One read transaction: the tables and the feed position are one consistent state.
        try await read { db in
            let position = try ChangeFeedSQL.head(db)
            var projects: [Int64: (topics: [String: [UInt32]], registered: [UInt32])] = [:]
            var indexed: [Int64: TokenAttributeIndex] = [:]
            for project in try Int64.fetchAll(db, sql: "SELECT id FROM project") {
                var topics: [String: [UInt32]] = [:]
                let members = try db.cachedStatement(
                    sql: "SELECT tokenId FROM subscription WHERE topicId = ? ORDER BY tokenId")
                for topic in try Row.fetchAll(
                    db, sql: "SELECT id, name FROM topic WHERE projectId = ?", arguments: [project])
                {
                    var ids: [UInt32] = []
                    let cursor = try Int64.fetchCursor(members, arguments: [topic["id"] as Int64])
                    while let id = try cursor.next() { ids.append(UInt32(id)) }
                    topics[topic["name"]] = ids
                }
                // Every token once, in id order: the registered ones, and what each says.
                var registered: [UInt32] = []
                var attributes = TokenAttributeIndex.Builder()
                let rows = try Row.fetchCursor(
                    db,
                    sql: """
                        SELECT id, state = 'registered', platform, locale, timeZone, appVersion,
                               COALESCE(lastSeenAt, updatedAt)
                        FROM token WHERE projectId = ? ORDER BY id
                        """,
                    arguments: [project])
                while let row = try rows.next() {
                    let id = UInt32(row[0] as Int64)
                    if row[1] as Bool { registered.append(id) }
                    attributes.add(
                        id, platform: row[2], locale: row[3], timeZone: row[4], appVersion: row[5],
                        seenDay: SeenDay.of(milliseconds: row[6]))
                }
                projects[project] = (topics, registered)
                indexed[project] = attributes.finish()
            }
            return AudienceLoad(projects: projects, attributes: indexed, cursor: FeedCursor(watermark: position))
        }
    }

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
