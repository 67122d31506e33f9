import Foundation
import PostgresNIO
import Registry

/// The audit log on PostgreSQL: the `auditEntry` table of migration v15-audit-log. Entries are
/// written inside the transaction of the change they record (`insertAudit`), or alone; which
/// changes are audited, and what an entry says, is `Registry`'s (`AuditLog.swift`).
extension PostgresStore: AuditStore {
    public func appendAudit(_ write: AuditWrite) async throws {
        try await transaction { connection in try await Self.insertAudit(connection, write) }
    }

    public func auditEntries(of project: Int64, action: String?, since: Int64, before: Int64?, limit: Int)
        async throws -> [AuditEntry]
    {
        let before = before ?? Int64.max
        let query: PostgresQuery
        if let action {
            query = #"""
                SELECT id, at, "keyId", "keyName", client, action, target, details FROM "auditEntry"
                WHERE "projectId" = \#(project) AND action = \#(action) AND at >= \#(since) AND id < \#(before)
                ORDER BY id DESC LIMIT \#(Int64(limit))
                """#
        } else {
            query = #"""
                SELECT id, at, "keyId", "keyName", client, action, target, details FROM "auditEntry"
                WHERE "projectId" = \#(project) AND at >= \#(since) AND id < \#(before)
                ORDER BY id DESC LIMIT \#(Int64(limit))
                """#
        }
        return try await database.withConnection { connection in
            var entries: [AuditEntry] = []
            let rows = try await connection.query(query, logger: .silent)
            for try await row in rows.decode((Int64, Int64, Int64?, String, String, String, String, String).self) {
                entries.append(
                    AuditEntry(
                        id: row.0, project: project, at: EpochMilliseconds.date(row.1), keyID: row.2, keyName: row.3,
                        client: row.4, action: row.5, target: row.6, details: AuditEntry.details(fromJSON: row.7)))
            }
            return entries
        }
    }

    /// Inserts the entry in the transaction `connection` is in, and sweeps a few entries past the
    /// retention.
    static func insertAudit(_ connection: PostgresConnection, _ write: AuditWrite?) async throws {
        guard let write else { return }
        let entry = write.entry
        try await connection.run(
            #"""
            INSERT INTO "auditEntry" ("projectId", at, "keyId", "keyName", client, action, target, details)
            VALUES (\#(entry.project), \#(EpochMilliseconds.milliseconds(entry.at)), \#(entry.keyID), \#(entry.keyName),
              \#(entry.client), \#(entry.action), \#(entry.target), \#(entry.detailsJSON))
            """#)
        try await connection.run(
            #"""
            DELETE FROM "auditEntry" WHERE id IN
              (SELECT id FROM "auditEntry" WHERE at < \#(write.sweepBefore) ORDER BY at LIMIT \#(Int64(AuditWrite.sweepBatch)))
            """#)
    }
}
