import AudienceEngine
import GRDB
import GRDBSQLite
import Registry

/// The rows the audience index is built from, read in two halves a connection each can read at
/// once: every topic's members, and every token's state and attributes.
enum AudienceRows {
    /// Each project's topics and their sorted member ids, with the feed position they were read at.
    struct Subscriptions: Sendable {
        var position: Int64
        var topics: [Int64: [String: [UInt32]]] = [:]
    }

    /// Each project's registered token ids and attribute index, with the feed position they were read at.
    struct Tokens: Sendable {
        var position: Int64
        var registered: [Int64: [UInt32]] = [:]
        var attributes: [Int64: TokenAttributeIndex] = [:]
    }

    static func subscriptions(_ db: Database) throws -> Subscriptions {
        var read = Subscriptions(position: try ChangeFeedSQL.head(db))
        let members = try db.makeStatement(sql: "SELECT tokenId FROM subscription WHERE topicId = ? ORDER BY tokenId")
        for project in try Int64.fetchAll(db, sql: "SELECT id FROM project") {
            var topics: [String: [UInt32]] = [:]
            for topic in try Row.fetchAll(db, sql: "SELECT id, name FROM topic WHERE projectId = ?", arguments: [project]) {
                var ids: [UInt32] = []
                let cursor = try Int64.fetchCursor(members, arguments: [topic["id"] as Int64])
                while let id = try cursor.next() { ids.append(UInt32(id)) }
                topics[topic["name"]] = ids
            }
            read.topics[project] = topics
        }
        return read
    }

    static func tokens(_ db: Database) throws -> Tokens {
        var read = Tokens(position: try ChangeFeedSQL.head(db))
        let rows = try db.makeStatement(
            sql: """
                SELECT id, state = 'registered', platform, locale, timeZone, appVersion,
                       COALESCE(lastSeenAt, updatedAt)
                FROM token WHERE projectId = ? ORDER BY id
                """)
        for project in try Int64.fetchAll(db, sql: "SELECT id FROM project") {
            var registered: [UInt32] = []
            var attributes = TokenAttributeIndex.Builder()
            // Ten million rows at start-up: columns are read straight from the statement, and the
            // attributes as bytes the builder matches against the few values it has met.
            let cursor = try Row.fetchCursor(rows, arguments: [project])
            let row = rows.sqliteStatement
            while try cursor.next() != nil {
                let id = UInt32(truncatingIfNeeded: sqlite3_column_int64(row, 0))
                if sqlite3_column_int64(row, 1) != 0 { registered.append(id) }
                attributes.add(
                    id, utf8: (text(row, 2), text(row, 3), text(row, 4), text(row, 5)),
                    seenDay: SeenDay.of(milliseconds: sqlite3_column_int64(row, 6)))
            }
            read.registered[project] = registered
            read.attributes[project] = attributes.finish()
        }
        return read
    }

    /// Both halves as one load; they must have been read at the same feed position.
    static func load(_ subscriptions: Subscriptions, _ tokens: Tokens) -> AudienceLoad {
        precondition(subscriptions.position == tokens.position, "halves read at different feed positions")
        var projects: [Int64: (topics: [String: [UInt32]], registered: [UInt32])] = [:]
        for project in Set(subscriptions.topics.keys).union(tokens.registered.keys) {
            projects[project] = (subscriptions.topics[project] ?? [:], tokens.registered[project] ?? [])
        }
        return AudienceLoad(
            projects: projects, attributes: tokens.attributes, cursor: FeedCursor(watermark: tokens.position))
    }

    /// A text column's bytes, valid until the next step; `nil` when NULL.
    @inline(__always)
    private static func text(_ row: SQLiteStatement, _ column: Int32) -> UnsafeRawBufferPointer? {
        guard let start = sqlite3_column_text(row, column) else { return nil }
        return UnsafeRawBufferPointer(start: start, count: Int(sqlite3_column_bytes(row, column)))
    }
}
