import Foundation
import PostgresNIO
import Registry

/// The outbox's statements on PostgreSQL (`OutboxDriver`); its rules, and with them
/// `OutboxStore`, come from `Registry`. Several servers work one outbox: a claim takes unclaimed
/// or expired jobs with `FOR UPDATE SKIP LOCKED` (two servers never take the same job, and
/// neither waits for the other), and recording a page locks the job and checks the claim first,
/// so a server whose lease was taken over writes nothing.
extension PostgresStore: OutboxStore, OutboxDriver {
    // MARK: - Settings

    public func relayRows() async throws -> [Int64: ChannelSettings] {
        try await database.withConnection { connection in
            var settings: [Int64: ChannelSettings] = [:]
            for try await (project, channel, shown, secrets) in try await connection.query(
                #"SELECT "projectId", \#(unescaped: Self.channelSettingsColumns) FROM relay"#, logger: .silent
            ).decode((Int64, String, String, String).self) {
                settings[project] = Self.channelSettings((channel, shown, secrets))
            }
            return settings
        }
    }

    public func storeRelay(_ settings: ChannelSettings, of project: Project, audit: AuditWrite?) async throws {
        try await transaction { connection in
            try await connection.storeChannelSettings(
                settings, of: project, in: "relay", alsoSetting: #", "pausedUntil" = NULL"#, now: EpochMilliseconds.now())
            try await Self.insertAudit(connection, audit)
        }
    }

    public func cancelJob(_ job: Int64, project: Int64, messageID: String, now: Int64, audit: AuditWrite?)
        async throws -> Bool
    {
        try await transaction { connection in
            // The job's row lock orders this against a page being recorded: whichever commits
            // first, the other sees a finished job (a page records nothing then).
            guard
                try await connection.first(
                    #"""
                    UPDATE outbox SET "cancelledAt" = \#(now), "finishedAt" = \#(now), "claimedBy" = NULL,
                      "leaseUntil" = NULL
                    WHERE "messageId" = \#(job) AND "finishedAt" IS NULL RETURNING "messageId"
                    """#, as: Int64.self) != nil
            else { return false }
            try await connection.appendWebhookEvents(
                WebhookEventBatch(finishing: messageID, now: now), project: project, job: job, finished: true)
            try await Self.insertAudit(connection, audit)
            return true
        }
    }

    public func dropRelay(of project: Int64, failingPendingWith error: String, now: Int64, audit: AuditWrite?)
        async throws
    {
        try await transaction { connection in
            try await Self.insertAudit(connection, audit)
            // The jobs first, then their pending rows: a job another server inserts meanwhile is in
            // neither set (each statement sees what was committed when it began).
            var finished: [(job: Int64, id: String)] = []
            for try await (job, id) in try await connection.query(
                #"""
                WITH finished AS (
                  UPDATE outbox SET failed = recipients - delivered, "finishedAt" = \#(now), "claimedBy" = NULL
                  WHERE "projectId" = \#(project) AND "finishedAt" IS NULL RETURNING "messageId"
                )
                SELECT finished."messageId", message."messageId" FROM finished JOIN message ON message.id = finished."messageId"
                """#, logger: .silent
            ).decode((Int64, String).self) {
                finished.append((job, id))
            }
            try await connection.run(
                #"""
                UPDATE delivery SET state = 'failed', error = \#(error), "nextAttemptAt" = NULL, "updatedAt" = \#(now)
                WHERE state = 'pending' AND "messageId" = ANY(\#(finished.map(\.job)))
                """#)
            try await connection.run(#"DELETE FROM relay WHERE "projectId" = \#(project)"#)
            for (job, id) in finished {
                try await connection.appendWebhookEvents(
                    WebhookEventBatch(finishing: id, now: now), project: project, job: job, finished: true)
            }
        }
    }

    // MARK: - Jobs

    public func insertJob(_ job: NewOutboxJob, admitting admit: @escaping @Sendable (Int) throws -> Void) async throws
        -> Int64
    {
        let project = job.message.project.rowID
        return try await transaction { connection in
            // Logging first takes the project's log counter row: the project's enqueues take turns
            // from here, so the outbox's bound, counted next, holds across servers.
            let row = try await connection.insertMessage(
                job.message, body: job.body, chunks: job.chunks, entries: job.logEntries, bytes: job.logBytes)
            try admit(
                Int(
                    try await connection.one(
                        #"SELECT COUNT(*)::bigint FROM outbox WHERE "projectId" = \#(project) AND "finishedAt" IS NULL"#,
                        as: Int64.self)))
            try await connection.run(
                #"""
                INSERT INTO outbox ("messageId", "projectId", template, direct, recipients, walked, "claimedBy", "leaseUntil",
                  "notBefore", deadline, "createdAt")
                VALUES (\#(row), \#(project), \#(job.template), \#(job.direct != nil), \#(Int64(job.recipients)),
                        \#(job.walked ? Int64(1) : 0), \#(job.claimant), \#(job.leaseUntil), \#(job.notBefore), \#(job.deadline),
                        \#(job.createdAt))
                """#)
            guard let direct = job.direct else { return row }
            // One statement for all the recipients, in their order.
            try await connection.run(
                #"""
                INSERT INTO delivery ("messageId", "tokenId", token, state, attempts, "nextAttemptAt", "updatedAt")
                SELECT \#(row), token.id, CASE WHEN token.id IS NULL THEN listed.value END, 'pending', 0, \#(job.notBefore),
                       \#(job.createdAt)
                FROM unnest(\#(direct)::text[]) WITH ORDINALITY AS listed(value, place)
                LEFT JOIN token ON token."projectId" = \#(project) AND token.value = listed.value
                ORDER BY listed.place
                """#)
            return row
        }
    }

    public func claimJobs(_ claimant: String, leaseUntil: Int64, now: Int64, limit: Int, skipping: [Int64]) async throws
        -> [OutboxJob]
    {
        try await transaction { connection in
            var jobs: [OutboxJob] = []
            for try await (id, messageID, project, template, deadline, direct) in try await connection.query(
                #"""
                WITH taken AS (
                  UPDATE outbox SET "claimedBy" = \#(claimant), "leaseUntil" = \#(leaseUntil)
                  WHERE "messageId" IN (
                    SELECT outbox."messageId" FROM outbox JOIN relay ON relay."projectId" = outbox."projectId"
                    WHERE outbox."finishedAt" IS NULL AND outbox."notBefore" <= \#(now)
                      AND (outbox."claimedBy" IS NULL OR outbox."leaseUntil" < \#(now))
                      AND (relay."pausedUntil" IS NULL OR relay."pausedUntil" <= \#(now))
                      AND (outbox.direct OR outbox."projectId" <> ALL(\#(skipping)))
                    ORDER BY outbox.direct DESC, outbox."notBefore", outbox."messageId" LIMIT \#(limit)
                    FOR UPDATE OF outbox SKIP LOCKED)
                  RETURNING "messageId", "projectId", template, deadline, direct)
                SELECT taken."messageId", message."messageId", taken."projectId", taken.template, taken.deadline, taken.direct
                FROM taken JOIN message ON message.id = taken."messageId" ORDER BY taken."messageId"
                """#, logger: .silent
            ).decode((Int64, String, Int64, String, Int64, Bool).self) {
                jobs.append(
                    OutboxJob(
                        id: id, messageID: messageID, project: project, template: template,
                        deadline: EpochMilliseconds.date(deadline), isDirect: direct))
            }
            return jobs
        }
    }

    public func renewLease(of job: Int64, claimant: String, until: Int64) async throws -> Bool {
        try await transaction { connection in
            try await connection.count(
                #"""
                UPDATE outbox SET "leaseUntil" = \#(until)
                WHERE "messageId" = \#(job) AND "claimedBy" = \#(claimant) AND "finishedAt" IS NULL RETURNING 1
                """#) > 0
        }
    }

    public func releaseJobs(claimedBy claimant: String) async throws {
        try await transaction { connection in
            try await connection.run(
                #"""
                UPDATE outbox SET "claimedBy" = NULL, "leaseUntil" = NULL
                WHERE "claimedBy" = \#(claimant) AND "finishedAt" IS NULL
                """#)
        }
    }

    public func releaseJob(_ job: Int64, claimant: String, notBefore: Int64) async throws {
        try await transaction { connection in
            try await connection.run(
                #"""
                UPDATE outbox SET "claimedBy" = NULL, "leaseUntil" = NULL, "notBefore" = \#(notBefore)
                WHERE "messageId" = \#(job) AND "claimedBy" = \#(claimant)
                """#)
        }
    }

    public func updateRelay(of project: Int64, _ change: RelayChange) async throws {
        try await transaction { connection in try await connection.updateRelay(of: project, change) }
    }

    // MARK: - Pages

    public func dueRetries(of job: Int64, now: Int64, limit: Int) async throws -> [DeliveryAttempt] {
        try await database.withConnection { connection in
            var attempts: [DeliveryAttempt] = []
            for try await (id, tokenID, value, tries) in try await connection.query(
                #"""
                SELECT delivery.id, delivery."tokenId", COALESCE(delivery.token, token.value), delivery.attempts
                FROM delivery LEFT JOIN token ON token.id = delivery."tokenId"
                WHERE delivery."messageId" = \#(job) AND delivery.state = 'pending' AND delivery."nextAttemptAt" <= \#(now)
                ORDER BY delivery."nextAttemptAt" LIMIT \#(limit)
                """#, logger: .silent
            ).decode((Int64, Int32?, String?, Int32).self) {
                attempts.append(
                    DeliveryAttempt(token: value ?? "", tokenID: tokenID.map(Int64.init), attempts: Int(tries), deliveryID: id))
            }
            return attempts
        }
    }

    public func walkState(of job: Int64) async throws -> (cursor: Int64, walked: Bool)? {
        try await database.withConnection { connection in
            try await connection.first(
                #"SELECT cursor, walked FROM outbox WHERE "messageId" = \#(job)"#, as: (Int64, Int64).self
            ).map { (cursor: $0.0, walked: $0.1 != 0) }
        }
    }

    public func recipientIDs(of message: Int64, after cursor: Int64, limit: Int) async throws -> [UInt32] {
        let walk = RecipientWalk(after: cursor, limit: limit)
        guard let first = walk.firstChunk else { return [] }
        return try await database.withConnection { connection in
            var walk = walk
            for try await chunk in try await connection.query(
                #"""
                SELECT "tokenIds" FROM "messageRecipientChunk" WHERE "messageId" = \#(message) AND chunk >= \#(first) ORDER BY chunk
                """#, logger: .silent
            ).decode(Data.self) {
                guard walk.wantsMore else { break }
                walk.read(chunk)
            }
            return walk.ids
        }
    }

    public func walkTokens(_ ids: [UInt32]) async throws -> [WalkedToken] {
        guard !ids.isEmpty else { return [] }
        return try await database.withConnection { connection in
            var tokens: [WalkedToken] = []
            for try await (id, value, state) in try await connection.query(
                #"SELECT id, value, state FROM token WHERE id = ANY(\#(ids.map { Int32(bitPattern: $0) })) ORDER BY id"#,
                logger: .silent
            ).decode((Int32, String, String).self) {
                tokens.append(WalkedToken(id: Int64(id), value: value, isRegistered: state == "registered"))
            }
            return tokens
        }
    }

    public func recordPage(_ page: PageWrites, finishes: @escaping @Sendable (Int) -> Bool) async throws
        -> (finished: Bool, nextRetryAt: Int64?)?
    {
        try await transaction { connection in
            // The job's row stays locked to the end, so no claim takes it over meanwhile.
            guard
                case .some(.some(let holder)) = try await connection.first(
                    #"SELECT "claimedBy" FROM outbox WHERE "messageId" = \#(page.job) AND "finishedAt" IS NULL FOR UPDATE"#,
                    as: String?.self),
                holder == page.claimant
            else { return nil }
            try await connection.writeDeliveries(page.rows, of: page.job, now: page.now)
            let (pending, nextRetry) =
                page.countsPending
                ? try await connection.first(
                    #"""
                    SELECT COUNT(*)::bigint, MIN("nextAttemptAt") FROM delivery WHERE "messageId" = \#(page.job) AND state = 'pending'
                    """#, as: (Int64, Int64?).self) ?? (Int64(0), nil) : (Int64(0), nil)
            let finished = page.countsPending && finishes(Int(pending))
            try await connection.run(
                #"""
                UPDATE outbox SET cursor = \#(page.cursor), walked = \#(page.walked ? Int64(1) : 0),
                  delivered = delivered + \#(Int64(page.tally.delivered)), failed = failed + \#(Int64(page.tally.failed)),
                  "leaseUntil" = \#(page.leaseUntil), "finishedAt" = \#(finished ? page.now : nil),
                  "claimedBy" = CASE WHEN \#(finished) THEN NULL ELSE "claimedBy" END
                WHERE "messageId" = \#(page.job)
                """#)
            try await connection.updateRelay(of: page.project, page.tally)
            try await connection.appendWebhookEvents(page, finished: finished)
            return (finished, nextRetry)
        }
    }
}

extension PostgresConnection {
    /// A page's delivery rows, updated or inserted in order.
    fileprivate func writeDeliveries(_ rows: [DeliveryRowWrite], of job: Int64, now: Int64) async throws {
        for row in rows {
            let (state, error, attempts, next) = (row.state.rawValue, row.error, Int32(row.attempts), row.nextAttemptAt)
            if let id = row.id {
                try await run(
                    #"""
                    UPDATE delivery SET state = \#(state), error = \#(error), attempts = \#(attempts),
                      "nextAttemptAt" = \#(next), "updatedAt" = \#(now)
                    WHERE id = \#(id)
                    """#)
            } else {
                try await run(
                    #"""
                    INSERT INTO delivery ("messageId", "tokenId", token, state, error, attempts, "nextAttemptAt", "updatedAt")
                    VALUES (\#(job), \#(row.tokenID.map { Int32(truncatingIfNeeded: $0) }), \#(row.token), \#(state), \#(error),
                            \#(attempts), \#(next), \#(now))
                    """#)
            }
        }
    }

    fileprivate func updateRelay(of project: Int64, _ change: RelayChange) async throws {
        try await run(
            #"""
            UPDATE relay SET delivered = delivered + \#(Int64(change.delivered)), failed = failed + \#(Int64(change.failed)),
              pruned = pruned + \#(Int64(change.pruned)),
              "pausedUntil" = CASE WHEN \#(change.pausedUntil != nil) THEN \#(change.pausedUntil ?? nil) ELSE "pausedUntil" END,
              "lastError" = COALESCE(\#(change.lastError), "lastError"),
              "lastErrorAt" = COALESCE(\#(change.lastErrorAt), "lastErrorAt")
            WHERE "projectId" = \#(project)
            """#)
        if let minute = change.minute {
            try await countMinute(
                project,
                MinuteStats(minute: minute, delivered: change.delivered, failed: change.failed, pruned: change.pruned))
        }
    }
}
