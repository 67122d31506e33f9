import Foundation
import GRDB
import Registry

/// The sends' idempotency keys on SQLite: the `idempotencyKey` table of migration v12. A key is
/// taken only inside a message's write (`insertMessage`), so the one writer decides which request
/// has it; the rules are `Registry`'s (`Idempotency.swift`).
extension SQLiteStore: IdempotencyStore {
    public func idempotencyKey(_ key: String, in project: Int64, now: Int64) async throws -> IdempotencyRecord? {
        try await read { db in
            try Row.fetchOne(
                db.cachedStatement(
                    sql: """
                        SELECT key, fingerprint, messageId, status, headers, body, complete, createdAt, lockedUntil, expiresAt
                        FROM idempotencyKey
                        WHERE projectId = ? AND key = ? AND expiresAt > ?
                        """), arguments: [project, key, now]
            ).map { row in
                IdempotencyRecord(
                    key: row["key"], fingerprint: row["fingerprint"], messageID: row["messageId"],
                    answer: StoredAnswer(
                        status: row["status"], headers: StoredAnswer.headers(fromJSON: row["headers"]),
                        body: Array(row["body"] as Data)),
                    complete: row["complete"], createdAt: row["createdAt"], lockedUntil: row["lockedUntil"],
                    expiresAt: row["expiresAt"])
            }
        }
    }

    public func completeIdempotencyKey(_ key: String, in project: Int64, messageID: String, answer: StoredAnswer)
        async throws -> Bool
    {
        try await write { db, _ in
            try db.cachedStatement(
                sql: """
                    UPDATE idempotencyKey SET status = ?, headers = ?, body = ?, complete = 1
                    WHERE projectId = ? AND key = ? AND messageId = ? AND complete = 0
                    """
            ).execute(arguments: [answer.status, answer.headersJSON, Data(answer.body), project, key, messageID])
            return db.changesCount == 1
        }
    }

    /// Takes the key for the message being written, in its transaction: an expired key gives way,
    /// a live one throws `IdempotencyKeyTaken`. Then deletes a few expired keys of any project.
    static func takeIdempotencyKey(_ record: IdempotencyRecord, in project: Int64, _ db: Database) throws {
        try db.cachedStatement(sql: "DELETE FROM idempotencyKey WHERE projectId = ? AND key = ? AND expiresAt <= ?")
            .execute(arguments: [project, record.key, record.createdAt])
        try db.cachedStatement(
            sql: """
                INSERT INTO idempotencyKey (projectId, key, fingerprint, messageId, status, headers, body, complete,
                  createdAt, lockedUntil, expiresAt)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (projectId, key) DO NOTHING
                """
        ).execute(arguments: [
            project, record.key, record.fingerprint, record.messageID, record.answer.status, record.answer.headersJSON,
            Data(record.answer.body), record.complete, record.createdAt, record.lockedUntil, record.expiresAt,
        ])
        guard db.changesCount == 1 else { throw IdempotencyKeyTaken() }
        try db.cachedStatement(
            sql: """
                DELETE FROM idempotencyKey WHERE id IN
                  (SELECT id FROM idempotencyKey WHERE expiresAt <= ? ORDER BY expiresAt LIMIT ?)
                """
        ).execute(arguments: [record.createdAt, IdempotencyRecord.purgeBatch])
    }
}
