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

    public func writeWebhookCopy(
        _ webhook: WebhookCopy, into project: Int64, admitting admit: @escaping @Sendable (Int) -> Bool
    ) async throws -> Bool? {
        try await transaction { connection in
            // The project's row, locked: a webhook added meanwhile counts before or after, as in
            // `insertWebhook`.
            try await connection.run(#"SELECT id FROM project WHERE id = \#(project) FOR UPDATE"#)
            if let owner = try await connection.first(
                #"SELECT "projectId" FROM webhook WHERE "publicId" = \#(webhook.publicID) FOR UPDATE"#, as: Int64.self)
            {
                guard owner == project else { return nil }
                try await connection.run(
                    #"""
                    UPDATE webhook SET url = \#(webhook.url), events = \#(webhook.events), secret = \#(webhook.secret),
                      "previousSecret" = \#(webhook.previousSecret), "previousSecretUntil" = \#(webhook.previousSecretUntil),
                      "disabledAt" = \#(webhook.disabledAt), "disabledReason" = \#(webhook.disabledReason)
                    WHERE "publicId" = \#(webhook.publicID)
                    """#)
                return true
            }
            let existing = try await connection.one(
                #"SELECT COUNT(*)::bigint FROM webhook WHERE "projectId" = \#(project)"#, as: Int64.self)
            guard admit(Int(existing)) else { return false }
            try await connection.run(
                #"""
                INSERT INTO webhook ("publicId", "projectId", url, events, secret, "previousSecret", "previousSecretUntil",
                  "createdAt", "disabledAt", "disabledReason")
                VALUES (\#(webhook.publicID), \#(project), \#(webhook.url), \#(webhook.events), \#(webhook.secret),
                  \#(webhook.previousSecret), \#(webhook.previousSecretUntil), \#(webhook.createdAt), \#(webhook.disabledAt),
                  \#(webhook.disabledReason))
                """#)
            return true
        }
    }
}
