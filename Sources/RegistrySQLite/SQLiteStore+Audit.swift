import Foundation
import GRDB
import Registry

/// The audit log on SQLite: the `auditEntry` table of migration "v21 audit log". Entries are
/// written inside the transaction of the change they record (`insertAudit`), or alone; which
/// changes are audited, and what an entry says, is `Registry`'s (`AuditLog.swift`).
extension SQLiteStore: AuditStore {
    public func appendAudit(_ write: AuditWrite) async throws {
        try await self.write { db, _ in try Self.insertAudit(db, write) }
    }

    public func auditEntries(of project: Int64, action: String?, since: Int64, before: Int64?, limit: Int)
        async throws -> [AuditEntry]
    {
        try await read { db in
            let actionFilter = action == nil ? "" : "AND action = ?"
            var arguments: StatementArguments = [project, since, before ?? Int64.max]
            if let action { _ = arguments.append(contentsOf: [action]) }
            _ = arguments.append(contentsOf: [limit])
            return try Row.fetchAll(
                db,
                sql: """
                    SELECT id, at, keyId, keyName, client, action, target, details FROM auditEntry
                    WHERE projectId = ? AND at >= ? AND id < ? \(actionFilter)
                    ORDER BY id DESC LIMIT ?
                    """, arguments: arguments
            ).map { row in
                AuditEntry(
                    id: row["id"], project: project, at: EpochMilliseconds.date(row["at"]), keyID: row["keyId"],
                    keyName: row["keyName"], client: row["client"], action: row["action"], target: row["target"],
                    details: AuditEntry.details(fromJSON: row["details"]))
            }
        }
    }

    /// Inserts the entry in the transaction `db` is in, and sweeps a few entries past the retention.
    static func insertAudit(_ db: Database, _ write: AuditWrite?) throws {
        guard let write else { return }
        let entry = write.entry
        try db.cachedStatement(
            sql: """
                INSERT INTO auditEntry (projectId, at, keyId, keyName, client, action, target, details)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                """
        ).execute(arguments: [
            entry.project, EpochMilliseconds.milliseconds(entry.at), entry.keyID, entry.keyName, entry.client,
            entry.action, entry.target, entry.detailsJSON,
        ])
        try db.cachedStatement(
            sql: """
                DELETE FROM auditEntry WHERE id IN
                  (SELECT id FROM auditEntry WHERE at < ? ORDER BY at LIMIT ?)
                """
        ).execute(arguments: [write.sweepBefore, AuditWrite.sweepBatch])
    }
}
