import AudienceEngine
import Foundation
import GRDB
import Registry

/// The statements the import (`SQLiteArchiveDriver`) and the registry's writes (`SQLiteWriteDriver`)
/// share (`RegistryRowStatements`), written once.
enum SQLiteRowStatements {
    static func memberCount(of group: Int64, _ db: Database) throws -> Int {
        try Int.fetchOne(
            db.cachedStatement(sql: "SELECT COUNT(*) FROM groupMember WHERE groupId = ?"), arguments: [group])
            ?? 0
    }

    static func deleteGroup(_ group: Int64, _ db: Database) throws {
        try db.cachedStatement(sql: "DELETE FROM deviceGroup WHERE id = ?").execute(arguments: [group])
    }
}

/// The statements of the registry's token, topic and group writes on SQLite (`RegistryWriteDriver`),
/// run by the shared rules inside one savepoint of the group commit, on the writer's thread. SQLite
/// has one writer, so nothing is locked: every write is serialized already. Statements over many
/// tokens run one cached statement per token, which costs no round trip here.
public struct SQLiteWriteDriver: RegistryWriteDriver {
    let db: Database

    public func memberCount(of group: Int64) throws -> Int { try SQLiteRowStatements.memberCount(of: group, db) }
    public func deleteGroup(_ group: Int64) throws { try SQLiteRowStatements.deleteGroup(group, db) }

    // MARK: - Tokens

    public func token(_ value: String, in project: Int64) throws -> WriteTokenRow? {
        let statement = try db.cachedStatement(sql: "SELECT id, state FROM token WHERE projectId = ? AND value = ?")
        guard let row = try Row.fetchOne(statement, arguments: [project, value]) else { return nil }
        return WriteTokenRow(id: row[0], state: TokenState(rawValue: row[1]) ?? .registered, isNew: false)
    }

    public func tokens(_ values: [String], in project: Int64) throws -> [String: WriteTokenRow] {
        var rows: [String: WriteTokenRow] = [:]
        for value in values { rows[value] = try token(value, in: project) }
        return rows
    }

    public func tokenRegistering(_ value: String, in project: Int64, at now: Int64) throws -> WriteTokenRow {
        // Insert first: a new token costs one statement, a known one two.
        let insert = try db.cachedStatement(
            sql: """
                INSERT INTO token (projectId, value, state, createdAt, updatedAt, lastSeenAt)
                VALUES (?, ?, 'registered', ?, ?, ?)
                ON CONFLICT (projectId, value) DO NOTHING
                """)
        try insert.execute(arguments: [project, value, now, now, now])
        guard db.changesCount > 0 else {
            guard let row = try token(value, in: project) else { throw RegistryWriteFailure("a token is missing") }
            return row
        }
        return WriteTokenRow(id: db.lastInsertedRowID, state: .registered, isNew: true)
    }

    public func tokensRegistering(_ values: [String], in project: Int64, at now: Int64) throws
        -> [String: WriteTokenRow]
    {
        var rows: [String: WriteTokenRow] = [:]
        rows.reserveCapacity(values.count)
        for value in values { rows[value] = try tokenRegistering(value, in: project, at: now) }
        return rows
    }

    public func setState(_ state: TokenState, ofToken token: Int64, at now: Int64) throws {
        try db.cachedStatement(sql: "UPDATE token SET state = ?, updatedAt = ? WHERE id = ?")
            .execute(arguments: [state.rawValue, now, token])
    }

    public func updateAttributes(_ changes: [(token: Int64, change: TokenAttributeChange, seenAt: Int64)]) throws {
        // One statement for every change: each field's flag says whether it changes, its value
        // (`NULL` clears) what to.
        let update = try db.cachedStatement(
            sql: """
                UPDATE token SET
                  platform = CASE WHEN ? THEN ? ELSE platform END,
                  locale = CASE WHEN ? THEN ? ELSE locale END,
                  timeZone = CASE WHEN ? THEN ? ELSE timeZone END,
                  appVersion = CASE WHEN ? THEN ? ELSE appVersion END,
                  lastSeenAt = ?
                WHERE id = ?
                """)
        for (token, change, seenAt) in changes {
            try update.execute(arguments: [
                change.platform.changes, change.platform.value?.rawValue, change.locale.changes, change.locale.value,
                change.timeZone.changes, change.timeZone.value, change.appVersion.changes, change.appVersion.value,
                seenAt, token,
            ])
        }
    }

    public func markSeen(_ tokens: [Int64], at now: Int64) throws {
        let update = try db.cachedStatement(sql: "UPDATE token SET lastSeenAt = ? WHERE id = ?")
        for token in tokens { try update.execute(arguments: [now, token]) }
    }

    public func tokenInfo(_ value: String, in project: Int64) throws -> TokenInfo? {
        try SQLiteStore.tokenInfo(db, value, in: project)
    }

    public func tokenInfos(_ values: [String], in project: Int64) throws -> [String: TokenInfo] {
        var infos: [String: TokenInfo] = [:]
        for value in values { infos[value] = try SQLiteStore.tokenInfo(db, value, in: project) }
        return infos
    }

    public func rekeyRows(from: String, to: String, in project: Int64, at now: Int64) throws
        -> (from: WriteTokenRow?, to: WriteTokenRow)
    {
        // One writer: nothing to lock, and an unknown source stops the write before the target's insert.
        guard let source = try token(from, in: project) else {
            return (nil, WriteTokenRow(id: 0, state: .registered, isNew: true))
        }
        return (source, try tokenRegistering(to, in: project, at: now))
    }

    public func insertAudit(_ audit: AuditWrite?) throws {
        try SQLiteStore.insertAudit(db, audit)
    }

    // MARK: - Topics

    public func topicID(_ name: String, in project: Int64) throws -> Int64? {
        try Int64.fetchOne(
            db.cachedStatement(sql: "SELECT id FROM topic WHERE projectId = ? AND name = ?"), arguments: [project, name])
    }

    public func topicCreating(_ name: String, in project: Int64, at now: Int64) throws -> (id: Int64, created: Bool) {
        // Look first: subscribing to a topic that exists, the usual case, costs one statement.
        if let id = try topicID(name, in: project) { return (id, false) }
        try db.cachedStatement(sql: "INSERT INTO topic (projectId, name, createdAt) VALUES (?, ?, ?)")
            .execute(arguments: [project, name, now])
        return (db.lastInsertedRowID, true)
    }

    public func topics(ofToken token: Int64) throws -> [(id: Int64, name: String)] {
        try Row.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT topic.id, topic.name FROM subscription JOIN topic ON topic.id = subscription.topicId
                    WHERE subscription.tokenId = ? ORDER BY topic.name
                    """), arguments: [token]
        ).map { ($0[0], $0[1]) }
    }

    public func leaveTopics(_ token: Int64) throws -> [(id: Int64, name: String)] {
        let topics = try topics(ofToken: token)
        try deleteSubscriptions(ofToken: token)
        return topics
    }

    public func joinTopic(_ topic: Int64, token: Int64, at now: Int64) throws -> Bool {
        try db.cachedStatement(
            sql: "INSERT INTO subscription (topicId, tokenId, createdAt) VALUES (?, ?, ?) ON CONFLICT DO NOTHING"
        ).execute(arguments: [topic, token, now])
        return db.changesCount > 0
    }

    public func deleteSubscriptions(ofToken token: Int64) throws {
        try db.cachedStatement(sql: "DELETE FROM subscription WHERE tokenId = ?").execute(arguments: [token])
    }

    public func subscribed(_ tokens: [Int64], to topic: Int64) throws -> Set<Int64> {
        let exists = try db.cachedStatement(sql: "SELECT 1 FROM subscription WHERE topicId = ? AND tokenId = ?")
        var subscribed: Set<Int64> = []
        for token in tokens where try Bool.fetchOne(exists, arguments: [topic, token]) != nil {
            subscribed.insert(token)
        }
        return subscribed
    }

    public func topicCounts(of tokens: [Int64]) throws -> [Int64: Int] {
        let count = try db.cachedStatement(sql: "SELECT COUNT(*) FROM subscription WHERE tokenId = ?")
        var counts: [Int64: Int] = [:]
        for token in tokens { counts[token] = try Int.fetchOne(count, arguments: [token]) ?? 0 }
        return counts
    }

    public func insertSubscriptions(_ tokens: [Int64], to topic: Int64, at now: Int64) throws {
        let insert = try db.cachedStatement(
            sql: "INSERT INTO subscription (topicId, tokenId, createdAt) VALUES (?, ?, ?)")
        for token in tokens { try insert.execute(arguments: [topic, token, now]) }
    }

    public func deleteSubscriptions(_ tokens: [Int64], from topic: Int64) throws -> [Int64] {
        let delete = try db.cachedStatement(sql: "DELETE FROM subscription WHERE topicId = ? AND tokenId = ?")
        var deleted: [Int64] = []
        for token in tokens {
            try delete.execute(arguments: [topic, token])
            if db.changesCount > 0 { deleted.append(token) }
        }
        return deleted
    }

    /// A topic exists while it has subscribers.
    public func deleteTopicIfEmpty(_ topic: Int64) throws {
        try db.cachedStatement(
            sql: "DELETE FROM topic WHERE id = ? AND NOT EXISTS (SELECT 1 FROM subscription WHERE topicId = ?)"
        ).execute(arguments: [topic, topic])
    }

    public func deleteTopic(_ topic: Int64) throws {
        try db.cachedStatement(sql: "DELETE FROM topic WHERE id = ?").execute(arguments: [topic])
    }

    // MARK: - Groups

    public func insertGroup(_ name: String, in project: Int64, at now: Int64) throws -> Int64 {
        // The unique index on (projectId, name) is the check: no look-up before the insert.
        do {
            try db.cachedStatement(sql: "INSERT INTO deviceGroup (projectId, name, createdAt) VALUES (?, ?, ?)")
                .execute(arguments: [project, name, now])
        } catch let error as DatabaseError where error.extendedResultCode == .SQLITE_CONSTRAINT_UNIQUE {
            throw RegistryError.groupNameTaken
        }
        return db.lastInsertedRowID
    }

    public func groupName(_ group: Int64, in project: Int64) throws -> String? {
        try String.fetchOne(
            db.cachedStatement(sql: "SELECT name FROM deviceGroup WHERE id = ? AND projectId = ?"),
            arguments: [group, project])
    }

    public func members(of group: Int64) throws -> Set<Int64> {
        Set(
            try Int64.fetchAll(
                db.cachedStatement(sql: "SELECT tokenId FROM groupMember WHERE groupId = ?"), arguments: [group]))
    }

    public func insertMembers(_ tokens: [Int64], into group: Int64, at now: Int64) throws {
        let insert = try db.cachedStatement(sql: "INSERT INTO groupMember (groupId, tokenId, addedAt) VALUES (?, ?, ?)")
        for token in tokens { try insert.execute(arguments: [group, token, now]) }
    }

    public func deleteMembers(_ tokens: [Int64], from group: Int64) throws {
        let delete = try db.cachedStatement(sql: "DELETE FROM groupMember WHERE groupId = ? AND tokenId = ?")
        for token in tokens { try delete.execute(arguments: [group, token]) }
    }

    public func joinGroup(_ group: Int64, token: Int64, at now: Int64) throws {
        try db.cachedStatement(
            sql: "INSERT INTO groupMember (groupId, tokenId, addedAt) VALUES (?, ?, ?) ON CONFLICT DO NOTHING"
        ).execute(arguments: [group, token, now])
    }

    public func groupNames(ofToken token: Int64) throws -> [String] {
        try String.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT deviceGroup.name FROM groupMember JOIN deviceGroup ON deviceGroup.id = groupMember.groupId
                    WHERE groupMember.tokenId = ? ORDER BY deviceGroup.name
                    """), arguments: [token])
    }

    public func leaveGroups(_ token: Int64) throws -> [Int64] {
        let groups = try Int64.fetchAll(
            db.cachedStatement(sql: "SELECT groupId FROM groupMember WHERE tokenId = ?"), arguments: [token])
        try db.cachedStatement(sql: "DELETE FROM groupMember WHERE tokenId = ?").execute(arguments: [token])
        return groups
    }
}

extension SQLiteStore: RegistryWriting {
    /// The rules run synchronously on the writer's thread, inside the write's savepoint: over this
    /// driver they never suspend, so `WriterThreadExecutor` runs them as one job, with no thread hop.
    public func writing<Value: Sendable>(
        _ body: @escaping @Sendable (SQLiteWriteDriver, ChangeLog) async throws -> Value
    ) async throws -> Committed<Value> {
        try await committing { db, log in
            // Used only on this thread: the rules' jobs run here, inside this write.
            nonisolated(unsafe) let db = db
            nonisolated(unsafe) let log = log
            return try WriterThreadExecutor.run { try await body(SQLiteWriteDriver(db: db), log) }
        }
    }
}
