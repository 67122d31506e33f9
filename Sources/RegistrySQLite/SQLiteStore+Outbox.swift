import Foundation
import GRDB
import Registry

/// The outbox's statements on SQLite (`OutboxDriver`): the `relay`, `outbox` and `delivery`
/// tables of migration v7. Its rules, and with them `OutboxStore`, come from `Registry`. Each
/// write is one savepoint of the group-commit writer.
extension SQLiteStore: OutboxStore, OutboxDriver {
    // MARK: - Settings

    public func relayRows() async throws -> [Int64: ChannelSettings] {
        try await read { db in
            var settings: [Int64: ChannelSettings] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT * FROM relay") {
                settings[row["projectId"]] = Self.channelSettings(row)
            }
            return settings
        }
    }

    public func storeRelay(_ settings: ChannelSettings, of project: Project, audit: AuditWrite?) async throws {
        try await write { db, _ in
            try Self.storeChannelSettings(settings, of: project, in: "relay", alsoSetting: ", pausedUntil = NULL", db)
            try Self.insertAudit(db, audit)
        }
    }

    public func dropRelay(of project: Int64, failingPendingWith error: String, now: Int64, audit: AuditWrite?)
        async throws
    {
        try await write { db, _ in
            try Self.insertAudit(db, audit)
            let unfinished = try Row.fetchAll(
                db,
                sql: """
                    SELECT outbox.messageId AS job, message.messageId AS id FROM outbox JOIN message ON message.id = outbox.messageId
                    WHERE outbox.projectId = ? AND outbox.finishedAt IS NULL
                    """, arguments: [project])
            try db.execute(
                sql: """
                    UPDATE delivery SET state = 'failed', error = ?, nextAttemptAt = NULL, updatedAt = ?
                    WHERE state = 'pending' AND messageId IN
                      (SELECT messageId FROM outbox WHERE projectId = ? AND finishedAt IS NULL)
                    """, arguments: [error, now, project])
            try db.execute(
                sql: """
                    UPDATE outbox SET failed = recipients - delivered, finishedAt = ?, claimedBy = NULL
                    WHERE projectId = ? AND finishedAt IS NULL
                    """, arguments: [now, project])
            try db.execute(sql: "DELETE FROM relay WHERE projectId = ?", arguments: [project])
            for row in unfinished {
                try Self.appendWebhookEvents(
                    WebhookEventBatch(finishing: row["id"], now: now), project: project, job: row["job"], finished: true, db)
            }
        }
    }

    public func cancelJob(_ job: Int64, project: Int64, messageID: String, now: Int64, audit: AuditWrite?)
        async throws -> Bool
    {
        try await write { db, _ in
            try db.execute(
                sql: """
                    UPDATE outbox SET cancelledAt = ?, finishedAt = ?, claimedBy = NULL, leaseUntil = NULL
                    WHERE messageId = ? AND finishedAt IS NULL
                    """, arguments: [now, now, job])
            guard db.changesCount > 0 else { return false }
            try Self.appendWebhookEvents(
                WebhookEventBatch(finishing: messageID, now: now), project: project, job: job, finished: true, db)
            try Self.insertAudit(db, audit)
            return true
        }
    }

    // MARK: - Jobs

    public func insertJob(_ job: NewOutboxJob, admitting admit: @escaping @Sendable (Int) throws -> Void) async throws
        -> Int64
    {
        let project = job.message.project.rowID
        return try await write { db, _ in
            try admit(
                Int.fetchOne(
                    db.cachedStatement(sql: "SELECT COUNT(*) FROM outbox WHERE projectId = ? AND finishedAt IS NULL"),
                    arguments: [project]) ?? 0)
            let row = try Self.insertMessage(
                job.message, body: job.body, chunks: job.chunks, entries: job.logEntries, bytes: job.logBytes, db)
            try db.cachedStatement(
                sql: """
                    INSERT INTO outbox (messageId, projectId, template, direct, recipients, walked, claimedBy, leaseUntil,
                      notBefore, deadline, createdAt)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """
            ).execute(arguments: [
                row, project, job.template, job.direct != nil, job.recipients, job.walked, job.claimant, job.leaseUntil,
                job.notBefore, job.deadline, job.createdAt,
            ])
            guard let direct = job.direct else { return row }
            let lookup = try db.cachedStatement(sql: "SELECT id FROM token WHERE projectId = ? AND value = ?")
            let insert = try db.cachedStatement(
                sql: """
                    INSERT INTO delivery (messageId, tokenId, token, state, attempts, nextAttemptAt, updatedAt)
                    VALUES (?, ?, ?, 'pending', 0, ?, ?)
                    """)
            for token in direct {
                let id = try Int64.fetchOne(lookup, arguments: [project, token])
                try insert.execute(arguments: [row, id, id == nil ? token : nil, job.notBefore, job.createdAt])
            }
            return row
        }
    }

    public func claimJobs(_ claimant: String, leaseUntil: Int64, now: Int64, limit: Int, skipping: [Int64]) async throws
        -> [OutboxJob]
    {
        let skipped = Self.jsonList(skipping)
        return try await write { db, _ in
            let ids = try Int64.fetchAll(
                db,
                sql: """
                    SELECT outbox.messageId FROM outbox JOIN relay ON relay.projectId = outbox.projectId
                    WHERE outbox.finishedAt IS NULL AND outbox.notBefore <= ?
                      AND (outbox.claimedBy IS NULL OR outbox.leaseUntil < ?)
                      AND (relay.pausedUntil IS NULL OR relay.pausedUntil <= ?)
                      AND (outbox.direct OR outbox.projectId NOT IN (SELECT value FROM json_each(?)))
                    ORDER BY outbox.direct DESC, outbox.notBefore, outbox.messageId LIMIT ?
                    """, arguments: [now, now, now, skipped, limit])
            var jobs: [OutboxJob] = []
            for id in ids {
                try db.execute(
                    sql: "UPDATE outbox SET claimedBy = ?, leaseUntil = ? WHERE messageId = ?",
                    arguments: [claimant, leaseUntil, id])
                if let job = try Self.job(id, db) { jobs.append(job) }
            }
            return jobs
        }
    }

    private static func job(_ id: Int64, _ db: Database) throws -> OutboxJob? {
        try Row.fetchOne(
            db,
            sql: """
                SELECT outbox.messageId AS id, message.messageId, outbox.projectId, outbox.template, outbox.deadline,
                  outbox.direct
                FROM outbox JOIN message ON message.id = outbox.messageId WHERE outbox.messageId = ?
                """, arguments: [id]
        ).map {
            OutboxJob(
                id: $0["id"], messageID: $0["messageId"], project: $0["projectId"], template: $0["template"],
                deadline: EpochMilliseconds.date($0["deadline"]), isDirect: $0["direct"])
        }
    }

    public func renewLease(of job: Int64, claimant: String, until: Int64) async throws -> Bool {
        try await write { db, _ in
            try db.execute(
                sql: "UPDATE outbox SET leaseUntil = ? WHERE messageId = ? AND claimedBy = ? AND finishedAt IS NULL",
                arguments: [until, job, claimant])
            return db.changesCount > 0
        }
    }

    public func releaseJobs(claimedBy claimant: String) async throws {
        try await write { db, _ in
            try db.execute(
                sql: "UPDATE outbox SET claimedBy = NULL, leaseUntil = NULL WHERE claimedBy = ? AND finishedAt IS NULL",
                arguments: [claimant])
        }
    }

    public func releaseJob(_ job: Int64, claimant: String, notBefore: Int64) async throws {
        try await write { db, _ in
            try db.execute(
                sql: "UPDATE outbox SET claimedBy = NULL, leaseUntil = NULL, notBefore = ? WHERE messageId = ? AND claimedBy = ?",
                arguments: [notBefore, job, claimant])
        }
    }

    public func updateRelay(of project: Int64, _ change: RelayChange) async throws {
        try await write { db, _ in try Self.updateRelay(of: project, change, db) }
    }

    private static func updateRelay(of project: Int64, _ change: RelayChange, _ db: Database) throws {
        try db.cachedStatement(
            sql: """
                UPDATE relay SET delivered = delivered + ?, failed = failed + ?, pruned = pruned + ?,
                  pausedUntil = CASE WHEN ? THEN ? ELSE pausedUntil END, lastError = COALESCE(?, lastError),
                  lastErrorAt = COALESCE(?, lastErrorAt)
                WHERE projectId = ?
                """
        ).execute(arguments: [
            change.delivered, change.failed, change.pruned, change.pausedUntil != nil, change.pausedUntil ?? nil,
            change.lastError, change.lastErrorAt, project,
        ])
        if let minute = change.minute {
            try countMinute(
                project,
                MinuteStats(minute: minute, delivered: change.delivered, failed: change.failed, pruned: change.pruned),
                db)
        }
    }

    // MARK: - Pages

    public func dueRetries(of job: Int64, now: Int64, limit: Int) async throws -> [DeliveryAttempt] {
        try await read { db in
            try Row.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT delivery.id, delivery.tokenId, COALESCE(delivery.token, token.value) AS value, delivery.attempts
                        FROM delivery LEFT JOIN token ON token.id = delivery.tokenId
                        WHERE delivery.messageId = ? AND delivery.state = 'pending' AND delivery.nextAttemptAt <= ?
                        ORDER BY delivery.nextAttemptAt LIMIT ?
                        """), arguments: [job, now, limit]
            ).map {
                DeliveryAttempt(token: $0["value"] ?? "", tokenID: $0["tokenId"], attempts: $0["attempts"], deliveryID: $0["id"])
            }
        }
    }

    public func walkState(of job: Int64) async throws -> (cursor: Int64, walked: Bool)? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT cursor, walked FROM outbox WHERE messageId = ?", arguments: [job]).map {
                ($0["cursor"], $0["walked"])
            }
        }
    }

    public func recipientIDs(of message: Int64, after cursor: Int64, limit: Int) async throws -> [UInt32] {
        try await read { db in
            var walk = RecipientWalk(after: cursor, limit: limit)
            guard let first = walk.firstChunk else { return [] }
            let chunks = try Row.fetchCursor(
                db.cachedStatement(
                    sql: "SELECT tokenIds FROM messageRecipientChunk WHERE messageId = ? AND chunk >= ? ORDER BY chunk"),
                arguments: [message, first])
            while walk.wantsMore, let row = try chunks.next() { walk.read(row[0]) }
            return walk.ids
        }
    }

    public func walkTokens(_ ids: [UInt32]) async throws -> [WalkedToken] {
        guard !ids.isEmpty else { return [] }
        return try await read { db in
            try Row.fetchAll(
                db.cachedStatement(
                    sql: "SELECT id, value, state FROM token WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id"),
                arguments: [Self.jsonList(ids)]
            ).map { WalkedToken(id: $0["id"], value: $0["value"], isRegistered: ($0["state"] as String) == "registered") }
        }
    }

    public func recordPage(_ page: PageWrites, finishes: @escaping @Sendable (Int) -> Bool) async throws
        -> (finished: Bool, nextRetryAt: Int64?)?
    {
        try await write { db, _ in
            guard
                try String.fetchOne(
                    db.cachedStatement(sql: "SELECT claimedBy FROM outbox WHERE messageId = ? AND finishedAt IS NULL"),
                    arguments: [page.job]) == page.claimant
            else { return nil }
            let update = try db.cachedStatement(
                sql: "UPDATE delivery SET state = ?, error = ?, attempts = ?, nextAttemptAt = ?, updatedAt = ? WHERE id = ?")
            let insert = try db.cachedStatement(
                sql: """
                    INSERT INTO delivery (messageId, tokenId, token, state, error, attempts, nextAttemptAt, updatedAt)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    """)
            for row in page.rows {
                if let id = row.id {
                    try update.execute(arguments: [row.state.rawValue, row.error, row.attempts, row.nextAttemptAt, page.now, id])
                } else {
                    try insert.execute(arguments: [
                        page.job, row.tokenID, row.token, row.state.rawValue, row.error, row.attempts, row.nextAttemptAt,
                        page.now,
                    ])
                }
            }
            let waiting =
                page.countsPending
                ? try Row.fetchOne(
                    db.cachedStatement(
                        sql: "SELECT COUNT(*), MIN(nextAttemptAt) FROM delivery WHERE messageId = ? AND state = 'pending'"),
                    arguments: [page.job]) : nil
            let finished = page.countsPending && finishes(waiting?[0] ?? 0)
            try db.cachedStatement(
                sql: """
                    UPDATE outbox SET cursor = ?, walked = ?, delivered = delivered + ?, failed = failed + ?,
                      leaseUntil = ?, finishedAt = ?, claimedBy = CASE WHEN ? THEN NULL ELSE claimedBy END
                    WHERE messageId = ?
                    """
            ).execute(arguments: [
                page.cursor, page.walked, page.tally.delivered, page.tally.failed, page.leaseUntil,
                finished ? page.now : nil, finished, page.job,
            ])
            try Self.updateRelay(of: page.project, page.tally, db)
            try Self.appendWebhookEvents(page, finished: finished, db)
            return (finished, waiting?[1] as Int64?)
        }
    }
}
