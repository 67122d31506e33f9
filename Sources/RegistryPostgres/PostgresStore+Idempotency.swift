import Foundation
import PostgresNIO
import Registry

/// The sends' idempotency keys on PostgreSQL: the `idempotencyKey` table of migration v6. A key
/// is taken inside a message's transaction with `INSERT … ON CONFLICT`: of two servers taking one
/// key at once, the second waits for the first's commit and finds the key taken. The rules are
/// `Registry`'s (`Idempotency.swift`).
extension PostgresStore: IdempotencyStore {
    public func idempotencyKey(_ key: String, in project: Int64, now: Int64) async throws -> IdempotencyRecord? {
        try await database.withConnection { connection in
            try await connection.first(
                #"""
                SELECT fingerprint, "messageId", status, headers, body, complete, "createdAt", "lockedUntil", "expiresAt"
                FROM "idempotencyKey"
                WHERE "projectId" = \#(project) AND key = \#(key) AND "expiresAt" > \#(now)
                """#, as: (String, String, Int32, String, Data, Bool, Int64, Int64, Int64).self
            ).map { (row: (String, String, Int32, String, Data, Bool, Int64, Int64, Int64)) -> IdempotencyRecord in
                let (fingerprint, messageID, status, headers, body, complete, createdAt, lockedUntil, expiresAt) = row
                return IdempotencyRecord(
                    key: key, fingerprint: fingerprint, messageID: messageID,
                    answer: StoredAnswer(
                        status: Int(status), headers: StoredAnswer.headers(fromJSON: headers), body: Array(body)),
                    complete: complete, createdAt: createdAt, lockedUntil: lockedUntil, expiresAt: expiresAt)
            }
        }
    }

    public func completeIdempotencyKey(_ key: String, in project: Int64, messageID: String, answer: StoredAnswer)
        async throws -> Bool
    {
        try await transaction { connection in
            try await connection.count(
                #"""
                UPDATE "idempotencyKey" SET status = \#(Int32(answer.status)), headers = \#(answer.headersJSON),
                  body = \#(Data(answer.body)), complete = true
                WHERE "projectId" = \#(project) AND key = \#(key) AND "messageId" = \#(messageID) AND NOT complete
                RETURNING 1
                """#) == 1
        }
    }
}

extension PostgresConnection {
    /// Takes the key for the message being written, in its transaction: an expired key gives way,
    /// a live one throws `IdempotencyKeyTaken`. Then deletes a few expired keys of any project.
    func takeIdempotencyKey(_ record: IdempotencyRecord, in project: Int64) async throws {
        let taken = try await count(
            #"""
            INSERT INTO "idempotencyKey" ("projectId", key, fingerprint, "messageId", status, headers, body, complete,
              "createdAt", "lockedUntil", "expiresAt")
            VALUES (\#(project), \#(record.key), \#(record.fingerprint), \#(record.messageID), \#(Int32(record.answer.status)),
                    \#(record.answer.headersJSON), \#(Data(record.answer.body)), \#(record.complete), \#(record.createdAt),
                    \#(record.lockedUntil), \#(record.expiresAt))
            ON CONFLICT ("projectId", key) DO UPDATE SET fingerprint = excluded.fingerprint,
              "messageId" = excluded."messageId", status = excluded.status, headers = excluded.headers,
              body = excluded.body, complete = excluded.complete, "createdAt" = excluded."createdAt",
              "lockedUntil" = excluded."lockedUntil", "expiresAt" = excluded."expiresAt"
            WHERE "idempotencyKey"."expiresAt" <= excluded."createdAt"
            RETURNING 1
            """#)
        guard taken == 1 else { throw IdempotencyKeyTaken() }
        try await run(
            #"""
            DELETE FROM "idempotencyKey" WHERE id IN
              (SELECT id FROM "idempotencyKey" WHERE "expiresAt" <= \#(record.createdAt) ORDER BY "expiresAt"
               LIMIT \#(IdempotencyRecord.purgeBatch) FOR UPDATE SKIP LOCKED)
            """#)
    }
}
