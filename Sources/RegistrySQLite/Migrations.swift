import AudienceEngine
import Foundation
import GRDB

/// The schema, as named migrations. A migration is never edited once it has landed: a change is
/// a new migration, and `schema/registry.sql` is regenerated from a freshly migrated database.
///
/// Times are milliseconds since 1970 (UTC) in integer columns: compact, and the views show them
/// as text for people at the `sqlite3` prompt.
enum Migrations {
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1 projects, tokens, groups, topics") { db in
            try db.execute(sql: v1)
        }
        migrator.registerMigration("v2 change feed, message log") { db in
            try db.execute(sql: v2)
        }
        migrator.registerMigration("v3 service accounts") { db in
            try db.execute(sql: v3)
        }
        // New tables only: their foreign keys are checked as rows go in, not by a scan of every
        // table of the database afterwards (minutes at 10M tokens).
        migrator.registerMigration("v4 token URIs, used assertions", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: v4)
        }
        migrator.registerMigration("v5 message recipients by chunk", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: v5)
            try moveRecipientsIntoChunks(db)
        }
        migrator.registerMigration("v6 imported notification keys", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: v6)
        }
        migrator.registerMigration("v7 relay and outbox", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: v7)
        }
        migrator.registerMigration("v8 upstream messages", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: v8)
        }
        migrator.registerMigration("v9 mirror of Google's device groups", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: v9)
        }
        migrator.registerMigration("v10 send budget", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: v10)
        }
        migrator.registerMigration("v12 idempotency keys", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: v12)
        }
        migrator.registerMigration("v13 webhooks", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: v13)
        }
        migrator.registerMigration("v14 minute stats", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: v14)
        }
        // Two small tables remade: nothing refers to them, so no foreign key is checked again.
        migrator.registerMigration("v15 channel settings", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: v15)
        }
        migrator.registerMigration("v16 relay error time", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: v16)
        }
        migrator.registerMigration("v17 message cancel", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: v17)
        }
        migrator.registerMigration("v19 key scopes", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: v19)
        }
        migrator.registerMigration("v20 service account scopes", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: "ALTER TABLE serviceAccount ADD COLUMN scopes INTEGER")
        }
        migrator.registerMigration("v18 webhook fairness", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: v18)
        }
        migrator.registerMigration("v21 audit log", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: v21)
        }
        migrator.registerMigration("v22 token attributes", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: v22)
        }
        migrator.registerMigration("v23 token policy", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: v23)
        }
        migrator.registerMigration("v24 skipped stale", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: v24)
        }
        migrator.registerMigration("v25 attribute feed", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: v25)
        }
        return migrator
    }

    /// Moves each logged message's recipients into `messageRecipientChunk`, a page of messages at
    /// a time. A recipient set that cannot be read (none has been seen) leaves its message out of
    /// searches by token; the message itself stays.
    private static func moveRecipientsIntoChunks(_ db: Database) throws {
        var after: Int64 = 0
        while true {
            let rows = try Row.fetchAll(
                db, sql: "SELECT id, projectId, recipients FROM message WHERE id > ? ORDER BY id LIMIT 100",
                arguments: [after])
            guard let last = rows.last else { return }
            after = last["id"]
            for row in rows where !(row["recipients"] as Data).isEmpty {
                var blob = [UInt8](row["recipients"] as Data)[...]
                if let recipients = try? RoaringBitmap(deserializing: &blob) {
                    try MessageRecipients.insert(
                        RecipientChunks.chunks(of: recipients), of: row["id"], project: row["projectId"], db)
                }
                try db.execute(sql: "UPDATE message SET recipients = X'' WHERE id = ?", arguments: [row["id"] as Int64])
            }
        }
    }
}
