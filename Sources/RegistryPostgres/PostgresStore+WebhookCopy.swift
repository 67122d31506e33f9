import Foundation
import PostgresNIO
import Registry

/// The `webhook` rows as `copy` reads and writes them (`WebhookCopyStore`).
extension PostgresStore: WebhookCopyStore {
    public func webhookCopies(of project: Int64) async throws -> [WebhookCopy] {
        try await database.withConnection { connection in
            var copies: [WebhookCopy] = []
            for try await (id, url, events, secret, previous, previousUntil, createdAt, disabledAt, reason)
                in try await connection.query(
                    #"""
                    SELECT "publicId", url, events, secret, "previousSecret", "previousSecretUntil", "createdAt",
                      "disabledAt", "disabledReason"
                    FROM webhook WHERE "projectId" = \#(project) ORDER BY id
                    """#, logger: .silent
                ).decode((String, String, Int64, String, String?, Int64?, Int64, Int64?, String?).self)
            {
                copies.append(
                    WebhookCopy(
                        publicID: id, url: url, events: events, secret: secret, previousSecret: previous,
                        previousSecretUntil: previousUntil, createdAt: createdAt, disabledAt: disabledAt,
                        disabledReason: reason))
            }
            return copies
        }
    }

    public func insertWebhookCopy(_ webhook: WebhookCopy, into project: Int64) async throws -> Bool {
        try await transaction { connection in
            try await connection.count(
                #"""
                INSERT INTO webhook ("publicId", "projectId", url, events, secret, "previousSecret", "previousSecretUntil",
                  "createdAt", "disabledAt", "disabledReason")
                VALUES (\#(webhook.publicID), \#(project), \#(webhook.url), \#(webhook.events), \#(webhook.secret),
                  \#(webhook.previousSecret), \#(webhook.previousSecretUntil), \#(webhook.createdAt), \#(webhook.disabledAt),
                  \#(webhook.disabledReason))
                ON CONFLICT ("publicId") DO NOTHING RETURNING 1
                """#) > 0
        }
    }
}
