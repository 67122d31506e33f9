import GRDB
import Registry

/// The `webhook` rows as `copy` reads and writes them (`WebhookCopyStore`).
extension SQLiteStore: WebhookCopyStore {
    public func webhookCopies(of project: Int64) async throws -> [WebhookCopy] {
        try await read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT publicId, url, events, secret, previousSecret, previousSecretUntil, createdAt, disabledAt,
                      disabledReason
                    FROM webhook WHERE projectId = ? ORDER BY id
                    """, arguments: [project]
            ).map {
                WebhookCopy(
                    publicID: $0["publicId"], url: $0["url"], events: $0["events"], secret: $0["secret"],
                    previousSecret: $0["previousSecret"], previousSecretUntil: $0["previousSecretUntil"],
                    createdAt: $0["createdAt"], disabledAt: $0["disabledAt"], disabledReason: $0["disabledReason"])
            }
        }
    }

    public func writeWebhookCopy(
        _ webhook: WebhookCopy, into project: Int64, admitting admit: @escaping @Sendable (Int) -> Bool
    ) async throws -> Bool? {
        try await write { db, _ in
            if let owner = try Int64.fetchOne(
                db, sql: "SELECT projectId FROM webhook WHERE publicId = ?", arguments: [webhook.publicID])
            {
                guard owner == project else { return nil }
                try db.execute(
                    sql: """
                        UPDATE webhook SET url = ?, events = ?, secret = ?, previousSecret = ?, previousSecretUntil = ?,
                          disabledAt = ?, disabledReason = ?
                        WHERE publicId = ?
                        """,
                    arguments: [
                        webhook.url, webhook.events, webhook.secret, webhook.previousSecret, webhook.previousSecretUntil,
                        webhook.disabledAt, webhook.disabledReason, webhook.publicID,
                    ])
                return true
            }
            let existing =
                try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM webhook WHERE projectId = ?", arguments: [project]) ?? 0
            guard admit(existing) else { return false }
            try db.execute(
                sql: """
                    INSERT INTO webhook (publicId, projectId, url, events, secret, previousSecret, previousSecretUntil,
                      createdAt, disabledAt, disabledReason)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    webhook.publicID, project, webhook.url, webhook.events, webhook.secret, webhook.previousSecret,
                    webhook.previousSecretUntil, webhook.createdAt, webhook.disabledAt, webhook.disabledReason,
                ])
            return true
        }
    }
}
