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

    public func insertWebhookCopy(_ webhook: WebhookCopy, into project: Int64) async throws -> Bool {
        try await write { db, _ in
            try db.execute(
                sql: """
                    INSERT INTO webhook (publicId, projectId, url, events, secret, previousSecret, previousSecretUntil,
                      createdAt, disabledAt, disabledReason)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    ON CONFLICT (publicId) DO NOTHING
                    """,
                arguments: [
                    webhook.publicID, project, webhook.url, webhook.events, webhook.secret, webhook.previousSecret,
                    webhook.previousSecretUntil, webhook.createdAt, webhook.disabledAt, webhook.disabledReason,
                ])
            return db.changesCount > 0
        }
    }
}
