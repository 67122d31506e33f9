import Foundation
import PostgresNIO
import Registry

/// The webhooks' statements on PostgreSQL (`WebhookDriver`): the `webhook` and `webhookEvent`
/// tables of migration v7-webhooks, events claimed `FOR UPDATE SKIP LOCKED` so that servers never
/// send one event at once. Their rules, and with them `WebhookStore`, come from `Registry`.
extension PostgresStore: WebhookStore, WebhookDriver {
    typealias WebhookColumns = (
        String, Int64, String, Int64, Int64, Int64, Int64, Int64, Int64, Int64?, String?, Int64?, Int64?, String?,
        Int64?, Int64?, Int64?
    )

    static func webhook(_ c: WebhookColumns) -> Webhook {
        Webhook(
            id: c.0, project: c.1, url: c.2, events: WebhookEventType.types(in: c.3),
            createdAt: EpochMilliseconds.date(c.4),
            backlog: Int(c.5), sent: Int(c.6), failed: Int(c.7), dropped: Int(c.8),
            lastAttemptAt: c.9.map(EpochMilliseconds.date), lastError: c.10,
            failingSince: c.11.map(EpochMilliseconds.date),
            disabledAt: c.12.map(EpochMilliseconds.date), disabledReason: c.13,
            previousSecretUntil: c.14.map(EpochMilliseconds.date), lastErrorAt: c.15.map(EpochMilliseconds.date),
            nextAttemptAt: c.16.map(EpochMilliseconds.date))
    }

    public func insertWebhook(
        _ new: NewWebhookRow, admitting admit: @escaping @Sendable (Int) throws -> Void, audit: AuditWrite?
    ) async throws -> Webhook {
        try await transaction { connection in
            // The project's row, locked: two servers adding a webhook at once count one after the other.
            try await connection.run(#"SELECT id FROM project WHERE id = \#(new.project) FOR UPDATE"#)
            try admit(
                Int(
                    try await connection.one(
                        #"SELECT COUNT(*)::bigint FROM webhook WHERE "projectId" = \#(new.project)"#, as: Int64.self)))
            try await connection.run(
                #"""
                INSERT INTO webhook ("publicId", "projectId", url, events, secret, "createdAt")
                VALUES (\#(new.publicID), \#(new.project), \#(new.url), \#(new.events), \#(new.secret), \#(new.createdAt))
                """#)
            try await Self.insertAudit(connection, audit)
            guard let webhook = try await connection.webhookRows(of: new.project, id: new.publicID).first else {
                throw PostgresStoreError("the webhook just added is not there")
            }
            return webhook
        }
    }

    public func webhookRows(of project: Int64, id: String?) async throws -> [Webhook] {
        try await database.withConnection { connection in try await connection.webhookRows(of: project, id: id) }
    }

    public func deleteWebhookRow(_ id: String, of project: Int64, audit: AuditWrite?) async throws -> Bool {
        try await transaction { connection in
            guard
                try await connection.count(
                    #"DELETE FROM webhook WHERE "projectId" = \#(project) AND "publicId" = \#(id) RETURNING 1"#) > 0
            else { return false }
            try await Self.insertAudit(connection, audit)
            return true
        }
    }

    public func replaceWebhookSecret(
        _ id: String, of project: Int64, with secret: String, previousUntil: Int64, audit: AuditWrite?
    ) async throws -> Webhook? {
        try await transaction { connection in
            guard
                try await connection.count(
                    #"""
                    UPDATE webhook SET "previousSecret" = secret, secret = \#(secret), "previousSecretUntil" = \#(previousUntil)
                    WHERE "projectId" = \#(project) AND "publicId" = \#(id) RETURNING 1
                    """#) > 0
            else { return nil }
            try await Self.insertAudit(connection, audit)
            return try await connection.webhookRows(of: project, id: id).first
        }
    }

    public func enableWebhookRow(_ id: String, of project: Int64, eventsDueAt: Int64, audit: AuditWrite?) async throws
        -> Webhook?
    {
        try await transaction { connection in
            // The webhook's row, locked, so that an attempt recorded meanwhile comes before or after.
            guard
                let (webhook, disabledAt) = try await connection.first(
                    #"""
                    SELECT id, "disabledAt" FROM webhook
                    WHERE "projectId" = \#(project) AND "publicId" = \#(id) FOR UPDATE
                    """#, as: (Int64, Int64?).self)
            else { return nil }
            if disabledAt != nil {
                try await connection.run(
                    #"""
                    UPDATE webhook SET "disabledAt" = NULL, "disabledReason" = NULL, "failingSince" = NULL
                    WHERE id = \#(webhook)
                    """#)
                try await Self.bringEventsForward(of: webhook, to: eventsDueAt, connection)
            }
            try await Self.insertAudit(connection, audit)
            return try await connection.webhookRows(of: project, id: id).first
        }
    }

    public func retryWebhookRows(_ id: String, of project: Int64, eventsDueAt: Int64, audit: AuditWrite?) async throws
        -> Webhook?
    {
        try await transaction { connection in
            guard
                let webhook = try await connection.first(
                    #"SELECT id FROM webhook WHERE "projectId" = \#(project) AND "publicId" = \#(id)"#, as: Int64.self)
            else { return nil }
            try await Self.bringEventsForward(of: webhook, to: eventsDueAt, connection)
            try await Self.insertAudit(connection, audit)
            return try await connection.webhookRows(of: project, id: id).first
        }
    }

    /// The webhook's events due later than `dueAt` are due at it (enabling, "retry now").
    private static func bringEventsForward(of webhook: Int64, to dueAt: Int64, _ connection: PostgresConnection)
        async throws
    {
        try await connection.run(
            #"""
            UPDATE "webhookEvent" SET "nextAttemptAt" = \#(dueAt)
            WHERE "webhookId" = \#(webhook) AND "nextAttemptAt" > \#(dueAt)
            """#)
    }

    public func dueWebhookRows(now: Int64) async throws -> [DueWebhook] {
        try await database.withConnection { connection in
            // A look first, on the due index: an idle queue, polled every second, costs one seek.
            guard
                try await connection.first(
                    #"SELECT id FROM "webhookEvent" WHERE "nextAttemptAt" <= \#(now) LIMIT 1"#, as: Int64.self) != nil
            else { return [] }
            // Each webhook's earliest claimable row, on ("webhookId", "nextAttemptAt"): a look in
            // order that stops at the first row nobody holds, however long the queue.
            var due: [DueWebhook] = []
            for try await (webhook, project, failing) in try await connection.query(
                #"""
                SELECT w.id, w."projectId", w."failingSince" IS NOT NULL FROM webhook w
                CROSS JOIN LATERAL (
                  SELECT e."nextAttemptAt" FROM "webhookEvent" e
                  WHERE e."webhookId" = w.id AND e."nextAttemptAt" <= \#(now)
                    AND (e."claimedBy" IS NULL OR e."leaseUntil" < \#(now))
                  ORDER BY e."nextAttemptAt" LIMIT 1) d
                WHERE w."disabledAt" IS NULL ORDER BY d."nextAttemptAt", w.id
                """#, logger: .silent
            ).decode((Int64, Int64, Bool).self) {
                due.append(DueWebhook(webhook: webhook, project: project, failing: failing))
            }
            return due
        }
    }

    public func claimWebhookRows(
        _ claimant: String, leaseUntil: Int64, now: Int64, counts: [(webhook: Int64, count: Int)]
    ) async throws -> [WebhookDelivery] {
        let webhooks = counts.map(\.webhook)
        let limits = counts.map { Int64($0.count) }
        return try await transaction { connection in
            var claimed: [WebhookDelivery] = []
            for try await (id, webhook, webhookID, project, eventID, type, payload, attempts, url, secret, previous)
                in try await connection.query(
                    #"""
                    WITH taken AS (
                      UPDATE "webhookEvent" SET "claimedBy" = \#(claimant), "leaseUntil" = \#(leaseUntil)
                      WHERE id IN (
                        SELECT c.id FROM unnest(\#(webhooks)::bigint[], \#(limits)::bigint[]) AS r(webhook, n)
                        JOIN webhook w ON w.id = r.webhook AND w."disabledAt" IS NULL
                        CROSS JOIN LATERAL (
                          SELECT e.id FROM "webhookEvent" e
                          WHERE e."webhookId" = r.webhook AND e."nextAttemptAt" <= \#(now)
                            AND (e."claimedBy" IS NULL OR e."leaseUntil" < \#(now))
                          ORDER BY e."nextAttemptAt", e.id LIMIT r.n
                          FOR UPDATE OF e SKIP LOCKED) c)
                      RETURNING id, "webhookId", "eventId", type, payload, attempts, "nextAttemptAt")
                    SELECT taken.id, taken."webhookId", w."publicId", w."projectId", taken."eventId", taken.type, taken.payload,
                      taken.attempts, w.url, w.secret,
                      CASE WHEN w."previousSecretUntil" > \#(now) THEN w."previousSecret" END
                    FROM taken JOIN webhook w ON w.id = taken."webhookId"
                    ORDER BY taken."nextAttemptAt", taken.id
                    """#, logger: .silent
                ).decode((Int64, Int64, String, Int64, String, String, String, Int32, String, String, String?).self)
            {
                claimed.append(
                    WebhookDelivery(
                        id: id, webhook: webhook, webhookID: webhookID, project: project, eventID: eventID, type: type,
                        payload: payload,
                        attempts: Int(attempts), url: url, secret: secret, previousSecret: previous))
            }
            return claimed
        }
    }

    public func finishWebhookAttempt(
        _ write: WebhookAttemptWrite, disable: @escaping @Sendable (Int64) -> String?
    ) async throws -> (held: Bool, disabled: String?) {
        try await transaction { connection in
            guard
                case .some(.some(let holder)) = try await connection.first(
                    #"SELECT "claimedBy" FROM "webhookEvent" WHERE id = \#(write.event) FOR UPDATE"#, as: String?.self),
                holder == write.claimant
            else { return (false, nil) }
            if write.delivered || write.nextAttemptAt == nil {
                try await connection.run(#"DELETE FROM "webhookEvent" WHERE id = \#(write.event)"#)
            } else {
                try await connection.run(
                    #"""
                    UPDATE "webhookEvent" SET attempts = attempts + 1, "nextAttemptAt" = \#(write.nextAttemptAt),
                      "lastError" = \#(write.error), "claimedBy" = NULL, "leaseUntil" = NULL
                    WHERE id = \#(write.event)
                    """#)
            }
            if write.delivered {
                try await connection.run(
                    #"""
                    UPDATE webhook SET sent = sent + 1, backlog = backlog - 1, "lastAttemptAt" = \#(write.now),
                      "failingSince" = NULL
                    WHERE id = \#(write.webhook)
                    """#)
                return (true, nil)
            }
            let gaveUp: Int64 = write.nextAttemptAt == nil ? 1 : 0
            guard
                case .some(.some(let since)) = try await connection.first(
                    #"""
                    UPDATE webhook SET failed = failed + \#(gaveUp), backlog = backlog - \#(gaveUp),
                      "lastAttemptAt" = \#(write.now), "lastError" = \#(write.error), "lastErrorAt" = \#(write.now),
                      "failingSince" = COALESCE("failingSince", \#(write.now))
                    WHERE id = \#(write.webhook)
                    RETURNING CASE WHEN "disabledAt" IS NULL THEN "failingSince" END
                    """#, as: Int64?.self),
                let reason = disable(since)
            else { return (true, nil) }
            try await connection.run(
                #"UPDATE webhook SET "disabledAt" = \#(write.now), "disabledReason" = \#(reason) WHERE id = \#(write.webhook)"#
            )
            return (true, reason)
        }
    }

    public func releaseWebhookRows(claimedBy claimant: String) async throws {
        try await transaction { connection in
            try await connection.run(
                #"UPDATE "webhookEvent" SET "claimedBy" = NULL, "leaseUntil" = NULL WHERE "claimedBy" = \#(claimant)"#)
        }
    }

    public func webhookTallyRows() async throws -> [WebhookTally] {
        try await database.withConnection { connection in
            var tallies: [WebhookTally] = []
            for try await (id, project, backlog, sent, failed, disabled) in try await connection.query(
                #"""
                SELECT w."publicId", p."projectId", w.backlog, w.sent, w.failed, w."disabledAt" IS NOT NULL
                FROM webhook w JOIN project p ON p.id = w."projectId" ORDER BY w.id
                """#, logger: .silent
            ).decode((String, String, Int64, Int64, Int64, Bool).self) {
                tallies.append(
                    WebhookTally(
                        id: id, projectID: project, backlog: Int(backlog), sent: Int(sent), failed: Int(failed),
                        disabled: disabled))
            }
            return tallies
        }
    }
}

extension PostgresConnection {
    fileprivate func webhookRows(of project: Int64, id: String?) async throws -> [Webhook] {
        var webhooks: [Webhook] = []
        for try await columns in try await query(
            #"""
            SELECT "publicId", "projectId", url, events, "createdAt", backlog, sent, failed, dropped, "lastAttemptAt",
              "lastError", "failingSince", "disabledAt", "disabledReason", "previousSecretUntil", "lastErrorAt",
              (SELECT e."nextAttemptAt" FROM "webhookEvent" e WHERE e."webhookId" = webhook.id
               ORDER BY e."nextAttemptAt" LIMIT 1)
            FROM webhook WHERE "projectId" = \#(project) AND (\#(id)::text IS NULL OR "publicId" = \#(id))
            ORDER BY id
            """#, logger: .silent
        ).decode(PostgresStore.WebhookColumns.self) {
            webhooks.append(PostgresStore.webhook(columns))
        }
        return webhooks
    }

    /// Queues the events of a recorded page for the project's enabled webhooks, inside
    /// `recordPage`'s transaction: nothing is read when the page has no event, one indexed read
    /// when the project has no webhook. A backlog read here may be another server's page short:
    /// the bound is approximate by at most the pages recorded at once; the counts themselves add up.
    func appendWebhookEvents(_ page: PageWrites, finished: Bool) async throws {
        try await appendWebhookEvents(page.webhookEvents, project: page.project, job: page.job, finished: finished)
    }

    /// Queues `batch`'s events of the project's job; `finished` adds its completion.
    func appendWebhookEvents(_ batch: WebhookEventBatch, project: Int64, job: Int64, finished: Bool) async throws {
        guard !batch.isEmpty(finished: finished) else { return }
        var targets: [WebhookEventBatch.Target] = []
        var projectID: String?
        for try await (id, events, backlog, name) in try await query(
            #"""
            SELECT w.id, w.events, w.backlog, p."projectId" FROM webhook w JOIN project p ON p.id = w."projectId"
            WHERE w."projectId" = \#(project) AND w."disabledAt" IS NULL ORDER BY w.id
            """#, logger: .silent
        ).decode((Int64, Int64, Int64, String).self) {
            targets.append(WebhookEventBatch.Target(rowID: id, events: events, backlog: Int(backlog)))
            projectID = name
        }
        guard let projectID else { return }
        var counts: WebhookEventBatch.Counts?
        if finished,
            let (delivered, failed, cancelled) = try await first(
                #"""
                SELECT delivered, failed,
                  CASE WHEN "cancelledAt" IS NULL THEN 0 ELSE recipients - delivered - failed END
                FROM outbox WHERE "messageId" = \#(job)
                """#, as: (Int64, Int64, Int64).self)
        {
            counts = WebhookEventBatch.Counts(delivered: Int(delivered), failed: Int(failed), cancelled: Int(cancelled))
        }
        let (rows, dropped) = batch.rows(for: targets, projectID: projectID, finished: finished, counts: counts)
        if !rows.isEmpty {
            // One statement for the page's events, whatever their number.
            try await run(
                #"""
                INSERT INTO "webhookEvent" ("webhookId", "eventId", type, payload, "nextAttemptAt", "createdAt")
                SELECT w, e, t, p, \#(batch.now), \#(batch.now)
                FROM unnest(\#(rows.map(\.webhook))::bigint[], \#(rows.map(\.eventID))::text[], \#(rows.map(\.type))::text[],
                            \#(rows.map(\.payload))::text[]) AS r(w, e, t, p)
                """#)
        }
        var added: [Int64: Int64] = [:]
        for row in rows { added[row.webhook, default: 0] += 1 }
        for webhook in Set(added.keys).union(dropped.keys).sorted() {
            try await run(
                #"""
                UPDATE webhook SET backlog = backlog + \#(added[webhook] ?? 0), dropped = dropped + \#(Int64(dropped[webhook] ?? 0))
                WHERE id = \#(webhook)
                """#)
        }
    }
}
