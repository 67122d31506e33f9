import Foundation
import GRDB
import Registry

/// The webhooks' statements on SQLite (`WebhookDriver`): the `webhook` and `webhookEvent` tables
/// of migration v13. Their rules, and with them `WebhookStore`, come from `Registry`.
extension SQLiteStore: WebhookStore, WebhookDriver {
    static let webhookColumns = """
        publicId, projectId, url, events, createdAt, backlog, sent, failed, dropped, lastAttemptAt, lastError,
        failingSince, disabledAt, disabledReason, previousSecretUntil, lastErrorAt,
        (SELECT nextAttemptAt FROM webhookEvent WHERE webhookId = webhook.id ORDER BY nextAttemptAt LIMIT 1)
          AS nextAttemptAt
        """

    static func webhook(_ row: Row) -> Webhook {
        Webhook(
            id: row["publicId"], project: row["projectId"], url: row["url"],
            events: WebhookEventType.types(in: row["events"]), createdAt: EpochMilliseconds.date(row["createdAt"]),
            backlog: row["backlog"], sent: row["sent"], failed: row["failed"], dropped: row["dropped"],
            lastAttemptAt: (row["lastAttemptAt"] as Int64?).map(EpochMilliseconds.date), lastError: row["lastError"],
            failingSince: (row["failingSince"] as Int64?).map(EpochMilliseconds.date),
            disabledAt: (row["disabledAt"] as Int64?).map(EpochMilliseconds.date),
            disabledReason: row["disabledReason"],
            previousSecretUntil: (row["previousSecretUntil"] as Int64?).map(EpochMilliseconds.date),
            lastErrorAt: (row["lastErrorAt"] as Int64?).map(EpochMilliseconds.date),
            nextAttemptAt: (row["nextAttemptAt"] as Int64?).map(EpochMilliseconds.date))
    }

    public func insertWebhook(
        _ new: NewWebhookRow, admitting admit: @escaping @Sendable (Int) throws -> Void, audit: AuditWrite?
    ) async throws -> Webhook {
        try await write { db, _ in
            try admit(
                Int.fetchOne(db, sql: "SELECT COUNT(*) FROM webhook WHERE projectId = ?", arguments: [new.project]) ?? 0
            )
            try db.execute(
                sql: """
                    INSERT INTO webhook (publicId, projectId, url, events, secret, createdAt) VALUES (?, ?, ?, ?, ?, ?)
                    """, arguments: [new.publicID, new.project, new.url, new.events, new.secret, new.createdAt])
            try Self.insertAudit(db, audit)
            let row = try Row.fetchOne(
                db, sql: "SELECT \(Self.webhookColumns) FROM webhook WHERE publicId = ?", arguments: [new.publicID])
            return Self.webhook(row!)
        }
    }

    public func webhookRows(of project: Int64, id: String?) async throws -> [Webhook] {
        try await read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT \(Self.webhookColumns) FROM webhook
                    WHERE projectId = ? AND (? IS NULL OR publicId = ?) ORDER BY id
                    """, arguments: [project, id, id]
            ).map(Self.webhook)
        }
    }

    public func deleteWebhookRow(_ id: String, of project: Int64, audit: AuditWrite?) async throws -> Bool {
        try await write { db, _ in
            try db.execute(sql: "DELETE FROM webhook WHERE projectId = ? AND publicId = ?", arguments: [project, id])
            guard db.changesCount > 0 else { return false }
            try Self.insertAudit(db, audit)
            return true
        }
    }

    public func replaceWebhookSecret(
        _ id: String, of project: Int64, with secret: String, previousUntil: Int64, audit: AuditWrite?
    ) async throws -> Webhook? {
        try await write { db, _ in
            try db.execute(
                sql: """
                    UPDATE webhook SET previousSecret = secret, secret = ?, previousSecretUntil = ?
                    WHERE projectId = ? AND publicId = ?
                    """, arguments: [secret, previousUntil, project, id])
            guard db.changesCount > 0 else { return nil }
            try Self.insertAudit(db, audit)
            return try Row.fetchOne(
                db, sql: "SELECT \(Self.webhookColumns) FROM webhook WHERE publicId = ?", arguments: [id]
            ).map(Self.webhook)
        }
    }

    public func enableWebhookRow(_ id: String, of project: Int64, eventsDueAt: Int64, audit: AuditWrite?) async throws
        -> Webhook?
    {
        try await write { db, _ in
            guard
                let row = try Row.fetchOne(
                    db, sql: "SELECT id, disabledAt FROM webhook WHERE projectId = ? AND publicId = ?",
                    arguments: [project, id])
            else { return nil }
            if (row["disabledAt"] as Int64?) != nil {
                let webhook: Int64 = row["id"]
                try db.execute(
                    sql: """
                        UPDATE webhook SET disabledAt = NULL, disabledReason = NULL, failingSince = NULL WHERE id = ?
                        """, arguments: [webhook])
                try Self.bringEventsForward(of: webhook, to: eventsDueAt, db)
            }
            try Self.insertAudit(db, audit)
            return try Row.fetchOne(
                db, sql: "SELECT \(Self.webhookColumns) FROM webhook WHERE publicId = ?", arguments: [id]
            ).map(Self.webhook)
        }
    }

    public func retryWebhookRows(_ id: String, of project: Int64, eventsDueAt: Int64, audit: AuditWrite?) async throws
        -> Webhook?
    {
        try await write { db, _ in
            guard
                let webhook = try Int64.fetchOne(
                    db, sql: "SELECT id FROM webhook WHERE projectId = ? AND publicId = ?", arguments: [project, id])
            else { return nil }
            try Self.bringEventsForward(of: webhook, to: eventsDueAt, db)
            try Self.insertAudit(db, audit)
            return try Row.fetchOne(
                db, sql: "SELECT \(Self.webhookColumns) FROM webhook WHERE id = ?", arguments: [webhook]
            ).map(Self.webhook)
        }
    }

    /// The webhook's events due later than `dueAt` are due at it (enabling, "retry now").
    private static func bringEventsForward(of webhook: Int64, to dueAt: Int64, _ db: Database) throws {
        try db.execute(
            sql: "UPDATE webhookEvent SET nextAttemptAt = ? WHERE webhookId = ? AND nextAttemptAt > ?",
            arguments: [dueAt, webhook, dueAt])
    }

    public func dueWebhookRows(now: Int64) async throws -> [DueWebhook] {
        // A look first, on the due index: an idle queue, polled every second, costs one seek.
        try await read { db in
            guard
                try Int64.fetchOne(
                    db.cachedStatement(sql: "SELECT id FROM webhookEvent WHERE nextAttemptAt <= ? LIMIT 1"),
                    arguments: [now]) != nil
            else { return [] }
            // Each webhook's earliest claimable row, on (webhookId, nextAttemptAt): a look in order
            // that stops at the first row nobody holds, however long the queue.
            return try Row.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT id, projectId, failing FROM (
                          SELECT webhook.id, webhook.projectId, webhook.failingSince IS NOT NULL AS failing,
                            (SELECT e.nextAttemptAt FROM webhookEvent e
                             WHERE e.webhookId = webhook.id AND e.nextAttemptAt <= ?
                               AND (e.claimedBy IS NULL OR e.leaseUntil < ?)
                             ORDER BY e.nextAttemptAt LIMIT 1) AS due
                          FROM webhook WHERE webhook.disabledAt IS NULL)
                        WHERE due IS NOT NULL ORDER BY due, id
                        """), arguments: [now, now]
            ).map { DueWebhook(webhook: $0["id"], project: $0["projectId"], failing: $0["failing"]) }
        }
    }

    public func claimWebhookRows(
        _ claimant: String, leaseUntil: Int64, now: Int64, counts: [(webhook: Int64, count: Int)]
    ) async throws -> [WebhookDelivery] {
        try await write { db, _ in
            let due = try db.cachedStatement(
                sql: """
                    SELECT e.id FROM webhookEvent e JOIN webhook ON webhook.id = e.webhookId
                    WHERE e.webhookId = ? AND webhook.disabledAt IS NULL AND e.nextAttemptAt <= ?
                      AND (e.claimedBy IS NULL OR e.leaseUntil < ?)
                    ORDER BY e.nextAttemptAt, e.id LIMIT ?
                    """)
            var ids: [Int64] = []
            for (webhook, count) in counts {
                ids += try Int64.fetchAll(due, arguments: [webhook, now, now, count])
            }
            guard !ids.isEmpty else { return [] }
            let list = Self.jsonList(ids)
            try db.execute(
                sql:
                    "UPDATE webhookEvent SET claimedBy = ?, leaseUntil = ? WHERE id IN (SELECT value FROM json_each(?))",
                arguments: [claimant, leaseUntil, list])
            return try Row.fetchAll(
                db,
                sql: """
                    SELECT webhookEvent.id, webhookEvent.webhookId, webhook.publicId, webhook.projectId, webhookEvent.eventId, webhookEvent.type,
                      webhookEvent.payload, webhookEvent.attempts, webhook.url, webhook.secret,
                      CASE WHEN webhook.previousSecretUntil > ? THEN webhook.previousSecret END AS previousSecret
                    FROM webhookEvent JOIN webhook ON webhook.id = webhookEvent.webhookId
                    WHERE webhookEvent.id IN (SELECT value FROM json_each(?))
                    ORDER BY webhookEvent.nextAttemptAt, webhookEvent.id
                    """, arguments: [now, list]
            ).map { row in
                WebhookDelivery(
                    id: row["id"], webhook: row["webhookId"], webhookID: row["publicId"], project: row["projectId"],
                    eventID: row["eventId"],
                    type: row["type"], payload: row["payload"], attempts: row["attempts"], url: row["url"],
                    secret: row["secret"], previousSecret: row["previousSecret"])
            }
        }
    }

    public func finishWebhookAttempt(
        _ write: WebhookAttemptWrite, disable: @escaping @Sendable (Int64) -> String?
    ) async throws -> (held: Bool, disabled: String?) {
        try await self.write { db, _ in
            guard
                try String.fetchOne(
                    db.cachedStatement(sql: "SELECT claimedBy FROM webhookEvent WHERE id = ?"), arguments: [write.event]
                )
                    == write.claimant
            else { return (false, nil) }
            if write.delivered || write.nextAttemptAt == nil {
                try db.cachedStatement(sql: "DELETE FROM webhookEvent WHERE id = ?").execute(arguments: [write.event])
            } else {
                try db.cachedStatement(
                    sql: """
                        UPDATE webhookEvent SET attempts = attempts + 1, nextAttemptAt = ?, lastError = ?, claimedBy = NULL,
                          leaseUntil = NULL
                        WHERE id = ?
                        """
                ).execute(arguments: [write.nextAttemptAt, write.error, write.event])
            }
            if write.delivered {
                try db.cachedStatement(
                    sql: """
                        UPDATE webhook SET sent = sent + 1, backlog = backlog - 1, lastAttemptAt = ?, failingSince = NULL
                        WHERE id = ?
                        """
                ).execute(arguments: [write.now, write.webhook])
                return (true, nil)
            }
            let gaveUp = write.nextAttemptAt == nil
            try db.cachedStatement(
                sql: """
                    UPDATE webhook SET failed = failed + ?, backlog = backlog - ?, lastAttemptAt = ?, lastError = ?,
                      lastErrorAt = ?, failingSince = COALESCE(failingSince, ?)
                    WHERE id = ?
                    """
            ).execute(
                arguments: [gaveUp ? 1 : 0, gaveUp ? 1 : 0, write.now, write.error, write.now, write.now, write.webhook])
            guard
                let since = try Int64.fetchOne(
                    db.cachedStatement(sql: "SELECT failingSince FROM webhook WHERE id = ? AND disabledAt IS NULL"),
                    arguments: [write.webhook]),
                let reason = disable(since)
            else { return (true, nil) }
            try db.execute(
                sql: "UPDATE webhook SET disabledAt = ?, disabledReason = ? WHERE id = ?",
                arguments: [write.now, reason, write.webhook])
            return (true, reason)
        }
    }

    public func releaseWebhookRows(claimedBy claimant: String) async throws {
        try await write { db, _ in
            try db.execute(
                sql: "UPDATE webhookEvent SET claimedBy = NULL, leaseUntil = NULL WHERE claimedBy = ?",
                arguments: [claimant])
        }
    }

    public func webhookTallyRows() async throws -> [WebhookTally] {
        try await read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT webhook.publicId, project.projectId, webhook.backlog, webhook.sent, webhook.failed,
                      webhook.disabledAt IS NOT NULL AS disabled
                    FROM webhook JOIN project ON project.id = webhook.projectId ORDER BY webhook.id
                    """
            ).map {
                WebhookTally(
                    id: $0["publicId"], projectID: $0["projectId"], backlog: $0["backlog"], sent: $0["sent"],
                    failed: $0["failed"], disabled: $0["disabled"])
            }
        }
    }

    // MARK: - Events, in the outbox's transaction

    /// Queues the events of a recorded page for the project's enabled webhooks, inside
    /// `recordPage`'s transaction: nothing is read when the page has no event, one indexed read
    /// when the project has no webhook.
    static func appendWebhookEvents(_ page: PageWrites, finished: Bool, _ db: Database) throws {
        try appendWebhookEvents(page.webhookEvents, project: page.project, job: page.job, finished: finished, db)
    }

    /// Queues `batch`'s events of the project's job; `finished` adds its completion.
    static func appendWebhookEvents(
        _ batch: WebhookEventBatch, project: Int64, job: Int64, finished: Bool, _ db: Database
    ) throws {
        guard !batch.isEmpty(finished: finished) else { return }
        let targets = try Row.fetchAll(
            db.cachedStatement(
                sql: """
                    SELECT webhook.id, webhook.events, webhook.backlog, project.projectId
                    FROM webhook JOIN project ON project.id = webhook.projectId
                    WHERE webhook.projectId = ? AND webhook.disabledAt IS NULL
                    """), arguments: [project])
        guard let projectID = targets.first?["projectId"] as String? else { return }
        var counts: WebhookEventBatch.Counts?
        if finished,
            let row = try Row.fetchOne(
                db.cachedStatement(
                    sql: """
                        SELECT delivered, failed,
                          CASE WHEN cancelledAt IS NULL THEN 0 ELSE recipients - delivered - failed END
                        FROM outbox WHERE messageId = ?
                        """),
                arguments: [job])
        {
            counts = WebhookEventBatch.Counts(delivered: row[0], failed: row[1], cancelled: row[2])
        }
        let (rows, dropped) = batch.rows(
            for: targets.map {
                WebhookEventBatch.Target(rowID: $0["id"], events: $0["events"], backlog: $0["backlog"])
            },
            projectID: projectID, finished: finished, counts: counts)
        let insert = try db.cachedStatement(
            sql: """
                INSERT INTO webhookEvent (webhookId, eventId, type, payload, nextAttemptAt, createdAt)
                VALUES (?, ?, ?, ?, ?, ?)
                """)
        var added: [Int64: Int] = [:]
        for row in rows {
            try insert.execute(arguments: [row.webhook, row.eventID, row.type, row.payload, batch.now, batch.now])
            added[row.webhook, default: 0] += 1
        }
        let update = try db.cachedStatement(
            sql: "UPDATE webhook SET backlog = backlog + ?, dropped = dropped + ? WHERE id = ?")
        for webhook in Set(added.keys).union(dropped.keys) {
            try update.execute(arguments: [added[webhook] ?? 0, dropped[webhook] ?? 0, webhook])
        }
    }
}
