import AudienceEngine
import Foundation
import PostgresNIO
import Registry

/// The relay's settings and outbox (see `OutboxStore`) on PostgreSQL. Several servers work one
/// outbox: a claim takes unclaimed or expired jobs with `FOR UPDATE SKIP LOCKED` (two servers
/// never take the same job, and neither waits for the other), and recording a page locks the job
/// and checks the claim first, so a server whose lease was taken over writes nothing.
extension PostgresStore: OutboxStore {
    /// Where the deliveries listing of pending recipients continues past the delivery rows, into
    /// the recipients not attempted yet: positions from here on are this plus a token id.
    static let walkPositions: Int64 = 1 << 40
    /// How many times its size of the walk a page of delivered recipients reads, at most.
    static let scanPages = 10

    // MARK: - Settings

    public func relaySettings() async throws -> [Int64: RelaySettings] {
        try await database.withConnection { connection in
            var settings: [Int64: RelaySettings] = [:]
            for try await (project, firebase, email, keyID, key, tokenURI, upstream) in try await connection.query(
                #"SELECT "projectId", \#(unescaped: Self.serviceAccountColumns) FROM relay"#, logger: .silent
            ).decode((Int64, String, String, String?, String, String, String).self) {
                settings[project] = Self.serviceAccountSettings((firebase, email, keyID, key, tokenURI, upstream))
            }
            return settings
        }
    }

    public func setRelay(_ settings: RelaySettings?, for project: Project) async throws {
        try await transaction { connection in
            let now = EpochMilliseconds.now()
            guard let settings else {
                // Turned off: what is still pending will not be delivered, and says so.
                try await connection.run(
                    #"""
                    UPDATE delivery SET state = 'failed', error = 'RELAY_OFF', "nextAttemptAt" = NULL, "updatedAt" = \#(now)
                    WHERE state = 'pending' AND "messageId" IN
                      (SELECT "messageId" FROM outbox WHERE "projectId" = \#(project.rowID) AND "finishedAt" IS NULL)
                    """#)
                try await connection.run(
                    #"""
                    UPDATE outbox SET failed = recipients - delivered, "finishedAt" = \#(now), "claimedBy" = NULL
                    WHERE "projectId" = \#(project.rowID) AND "finishedAt" IS NULL
                    """#)
                try await connection.run(#"DELETE FROM relay WHERE "projectId" = \#(project.rowID)"#)
                return
            }
            try await connection.storeServiceAccountSettings(
                settings, of: project, in: "relay", alsoSetting: #", "pausedUntil" = NULL"#, now: now)
        }
    }

    /// The columns a `relay` or `mirror` row keeps its service account and upstream in, alike.
    static let serviceAccountColumns =
        #""firebaseProjectId", "clientEmail", "privateKeyId", "privateKey", "tokenUri", upstream"#

    /// Settings from `serviceAccountColumns`, in their order.
    static func serviceAccountSettings(
        _ columns: (String, String, String?, String, String, String)
    ) -> RelaySettings {
        RelaySettings(
            firebaseProjectID: columns.0, clientEmail: columns.1, privateKeyID: columns.2, privateKey: columns.3,
            tokenURI: columns.4, upstream: columns.5)
    }

    // MARK: - Taking messages

    public func enqueue(
        _ message: AcceptedMessage, body: String, template: String, deadline: Date, direct: [String]?,
        claimant: String?, leaseUntil: Date, bounds: OutboxBounds
    ) async throws -> Int64 {
        let chunks = RecipientChunks.chunks(of: message.recipients)
        let project = message.project.rowID
        return try await transaction { connection in
            // Logging first takes the project's log counter row: the project's enqueues take turns
            // from here, so the outbox's bound, counted next, holds across servers.
            let row = try await connection.insertMessage(
                message, body: body, chunks: chunks, entries: bounds.logEntries, bytes: bounds.logBytes)
            let open = try await connection.one(
                #"SELECT COUNT(*)::bigint FROM outbox WHERE "projectId" = \#(project) AND "finishedAt" IS NULL"#, as: Int64.self)
            guard open < bounds.outboxMessages else { throw OutboxFull() }
            let now = EpochMilliseconds.now()
            try await connection.run(
                #"""
                INSERT INTO outbox ("messageId", "projectId", template, direct, recipients, walked, "claimedBy", "leaseUntil",
                  "notBefore", deadline, "createdAt")
                VALUES (\#(row), \#(project), \#(template), \#(direct != nil), \#(Int64(direct?.count ?? message.recipients.count)),
                        \#(direct != nil ? Int64(1) : 0), \#(claimant), \#(claimant == nil ? nil : EpochMilliseconds.milliseconds(leaseUntil)),
                        \#(now), \#(EpochMilliseconds.milliseconds(deadline)), \#(now))
                """#)
            if let direct {
                // One row per recipient token: the registry's id when it knows the token, else the token.
                try await connection.run(
                    #"""
                    INSERT INTO delivery ("messageId", "tokenId", token, state, attempts, "nextAttemptAt", "updatedAt")
                    SELECT \#(row), token.id, CASE WHEN token.id IS NULL THEN listed.value END, 'pending', 0, \#(now), \#(now)
                    FROM unnest(\#(direct)::text[]) WITH ORDINALITY AS listed(value, place)
                    LEFT JOIN token ON token."projectId" = \#(project) AND token.value = listed.value
                    ORDER BY listed.place
                    """#)
            }
            return row
        }
    }

    // MARK: - Working the outbox

    public func claim(_ claimant: String, leaseUntil: Date, now: Date, limit: Int, skipping: Set<Int64>) async throws
        -> [OutboxJob]
    {
        let time = EpochMilliseconds.milliseconds(now)
        let skipped = skipping.sorted()
        return try await transaction { connection in
            var jobs: [OutboxJob] = []
            for try await (id, messageID, project, template, deadline, direct) in try await connection.query(
                #"""
                WITH taken AS (
                  UPDATE outbox SET "claimedBy" = \#(claimant), "leaseUntil" = \#(EpochMilliseconds.milliseconds(leaseUntil))
                  WHERE "messageId" IN (
                    SELECT outbox."messageId" FROM outbox JOIN relay ON relay."projectId" = outbox."projectId"
                    WHERE outbox."finishedAt" IS NULL AND outbox."notBefore" <= \#(time)
                      AND (outbox."claimedBy" IS NULL OR outbox."leaseUntil" < \#(time))
                      AND (relay."pausedUntil" IS NULL OR relay."pausedUntil" <= \#(time))
                      AND outbox."projectId" <> ALL(\#(skipped))
                    ORDER BY outbox."notBefore", outbox."messageId" LIMIT \#(limit)
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

    public func nextAttempts(of job: OutboxJob, after inFlight: AttemptPage?, now: Date, limit: Int) async throws
        -> AttemptPage
    {
        let time = EpochMilliseconds.milliseconds(now)
        let sending = Set(inFlight?.attempts.compactMap(\.deliveryID) ?? [])
        return try await database.withConnection { connection in
            var attempts: [DeliveryAttempt] = []
            for try await (id, tokenID, value, tries) in try await connection.query(
                #"""
                SELECT delivery.id, delivery."tokenId", COALESCE(delivery.token, token.value), delivery.attempts
                FROM delivery LEFT JOIN token ON token.id = delivery."tokenId"
                WHERE delivery."messageId" = \#(job.id) AND delivery.state = 'pending' AND delivery."nextAttemptAt" <= \#(time)
                ORDER BY delivery."nextAttemptAt" LIMIT \#(limit + sending.count)
                """#, logger: .silent
            ).decode((Int64, Int32?, String?, Int32).self) where attempts.count < limit && !sending.contains(id) {
                attempts.append(
                    DeliveryAttempt(token: value ?? "", tokenID: tokenID.map(Int64.init), attempts: Int(tries), deliveryID: id))
            }
            var cursor: Int64
            let walked: Bool
            if let inFlight {
                (cursor, walked) = (inFlight.cursor, inFlight.walked)
            } else if let walk = try await connection.first(
                #"SELECT cursor, walked FROM outbox WHERE "messageId" = \#(job.id)"#, as: (Int64, Int64).self)
            {
                (cursor, walked) = (walk.0, walk.1 != 0)
            } else {
                return AttemptPage(attempts: attempts, alreadyGone: [], cursor: -1, walked: true)
            }
            guard !walked, attempts.count < limit else {
                return AttemptPage(attempts: attempts, alreadyGone: [], cursor: cursor, walked: walked)
            }
            let room = limit - attempts.count
            let ids = try await connection.recipients(of: job.id, after: cursor, limit: room + 1)
            let page = Array(ids.prefix(room))
            var gone: [DeliveryAttempt] = []
            if let last = page.last {
                for token in try await connection.tokens(page) {
                    let attempt = DeliveryAttempt(token: token.value, tokenID: token.id, attempts: 0, deliveryID: nil)
                    if token.isRegistered { attempts.append(attempt) } else { gone.append(attempt) }
                }
                cursor = Int64(last)
            }
            return AttemptPage(attempts: attempts, alreadyGone: gone, cursor: cursor, walked: ids.count <= room)
        }
    }

    public func record(
        _ outcomes: [DeliveryOutcome], of job: OutboxJob, page: AttemptPage, claimant: String, leaseUntil: Date,
        now: Date
    ) async throws -> JobProgress? {
        let time = EpochMilliseconds.milliseconds(now)
        return try await transaction { connection in
            // Only the claim's holder records: a server whose lease was taken over stops here. The
            // job's row stays locked to the end, so no claim takes it over meanwhile.
            guard
                case .some(.some(let holder)) = try await connection.first(
                    #"SELECT "claimedBy" FROM outbox WHERE "messageId" = \#(job.id) AND "finishedAt" IS NULL FOR UPDATE"#,
                    as: String?.self),
                holder == claimant
            else { return nil }
            var delivered: Int64 = 0
            var failed: Int64 = 0
            var lastError: String?
            for outcome in outcomes {
                let attempts = Int32(outcome.attemptsAfter)
                let next = outcome.nextAttemptAt.map(EpochMilliseconds.milliseconds)
                let (state, error) = (outcome.state.rawValue, outcome.error)
                if let id = outcome.attempt.deliveryID {
                    try await connection.run(
                        #"""
                        UPDATE delivery SET state = \#(state), error = \#(error), attempts = \#(attempts),
                          "nextAttemptAt" = \#(next), "updatedAt" = \#(time)
                        WHERE id = \#(id)
                        """#)
                } else if outcome.state == .delivered && !job.isDirect {
                    // Delivered at the first attempt of a walk: the cursor says so, no row does.
                } else {
                    let tokenID = outcome.attempt.tokenID.map { Int32(truncatingIfNeeded: $0) }
                    try await connection.run(
                        #"""
                        INSERT INTO delivery ("messageId", "tokenId", token, state, error, attempts, "nextAttemptAt", "updatedAt")
                        VALUES (\#(job.id), \#(tokenID), \#(tokenID == nil ? outcome.attempt.token : nil), \#(state), \#(error),
                                \#(attempts), \#(next), \#(time))
                        """#)
                }
                switch outcome.state {
                case .delivered: delivered += 1
                case .failed: failed += 1
                case .pending: break
                }
                if let error { lastError = error }
            }
            let (pending, nextRetry) = try await connection.first(
                #"""
                SELECT COUNT(*)::bigint, MIN("nextAttemptAt") FROM delivery WHERE "messageId" = \#(job.id) AND state = 'pending'
                """#, as: (Int64, Int64?).self) ?? (Int64(0), nil)
            let finished = page.walked && pending == 0
            try await connection.run(
                #"""
                UPDATE outbox SET cursor = \#(page.cursor), walked = \#(page.walked ? Int64(1) : 0),
                  delivered = delivered + \#(delivered), failed = failed + \#(failed),
                  "leaseUntil" = \#(EpochMilliseconds.milliseconds(leaseUntil)), "finishedAt" = \#(finished ? time : nil),
                  "claimedBy" = CASE WHEN \#(finished) THEN NULL ELSE "claimedBy" END
                WHERE "messageId" = \#(job.id)
                """#)
            try await connection.run(
                #"""
                UPDATE relay SET delivered = delivered + \#(delivered), failed = failed + \#(failed),
                  "lastError" = COALESCE(\#(lastError), "lastError")
                WHERE "projectId" = \#(job.project)
                """#)
            return JobProgress(finished: finished, nextRetryAt: nextRetry.map(EpochMilliseconds.date))
        }
    }

    public func renew(_ job: OutboxJob, claimant: String, leaseUntil: Date) async throws -> Bool {
        try await transaction { connection in
            try await connection.count(
                #"""
                UPDATE outbox SET "leaseUntil" = \#(EpochMilliseconds.milliseconds(leaseUntil))
                WHERE "messageId" = \#(job.id) AND "claimedBy" = \#(claimant) AND "finishedAt" IS NULL RETURNING 1
                """#) > 0
        }
    }

    public func releaseAll(claimedBy claimant: String) async throws {
        try await transaction { connection in
            try await connection.run(
                #"""
                UPDATE outbox SET "claimedBy" = NULL, "leaseUntil" = NULL
                WHERE "claimedBy" = \#(claimant) AND "finishedAt" IS NULL
                """#)
        }
    }

    public func release(_ job: OutboxJob, claimant: String, notBefore: Date) async throws {
        try await transaction { connection in
            try await connection.run(
                #"""
                UPDATE outbox SET "claimedBy" = NULL, "leaseUntil" = NULL, "notBefore" = \#(EpochMilliseconds.milliseconds(notBefore))
                WHERE "messageId" = \#(job.id) AND "claimedBy" = \#(claimant)
                """#)
        }
    }

    public func pause(project: Int64, until: Date?, error: String?) async throws {
        try await transaction { connection in
            try await connection.run(
                #"""
                UPDATE relay SET "pausedUntil" = \#(until.map(EpochMilliseconds.milliseconds)), "lastError" = COALESCE(\#(error), "lastError")
                WHERE "projectId" = \#(project)
                """#)
        }
    }

    public func countPruned(project: Int64, tokens: Int) async throws {
        try await transaction { connection in
            try await connection.run(#"UPDATE relay SET pruned = pruned + \#(Int64(tokens)) WHERE "projectId" = \#(project)"#)
        }
    }
}

extension PostgresConnection {
    /// Up to `limit` recipient ids of a logged message after `cursor` (-1: from the start), ascending.
    func recipients(of message: Int64, after cursor: Int64, limit: Int) async throws -> [UInt32] {
        // A position from a page token the client made up may be past every token id.
        guard cursor < Int64(UInt32.max) else { return [] }
        let first = cursor < 0 ? 0 : Int64(RoaringBitmap.chunk(of: UInt32(cursor)))
        var ids: [UInt32] = []
        for try await bytes in try await query(
            #"""
            SELECT "tokenIds" FROM "messageRecipientChunk" WHERE "messageId" = \#(message) AND chunk >= \#(first) ORDER BY chunk
            """#, logger: .silent
        ).decode(Data.self) {
            guard ids.count < limit else { break }
            var slice = [UInt8](bytes)[...]
            guard let chunk = try? RoaringBitmap(deserializing: &slice) else { continue }
            ids += chunk.ids(after: cursor < 0 ? nil : UInt32(cursor), limit: limit - ids.count)
        }
        return ids
    }

    /// The tokens of a walk's ids, in id order (an id whose token is gone has none).
    func tokens(_ ids: [UInt32]) async throws -> [(id: Int64, value: String, isRegistered: Bool)] {
        guard !ids.isEmpty else { return [] }
        var tokens: [(id: Int64, value: String, isRegistered: Bool)] = []
        for try await (id, value, state) in try await query(
            #"SELECT id, value, state FROM token WHERE id = ANY(\#(ids.map { Int32(bitPattern: $0) })) ORDER BY id"#,
            logger: .silent
        ).decode((Int32, String, String).self) { tokens.append((Int64(id), value, state == "registered")) }
        return tokens
    }
}

extension PostgresConnection {
    /// Inserts or replaces the project's service account and upstream in `table` (`relay` or
    /// `mirror`, never a value from outside); `alsoSetting` is more of the update's SET clause.
    func storeServiceAccountSettings(
        _ settings: RelaySettings, of project: Project, in table: String, alsoSetting: String = "", now: Int64
    ) async throws {
        try await run(
            #"""
            INSERT INTO \#(unescaped: table) ("projectId", \#(unescaped: PostgresStore.serviceAccountColumns), "createdAt")
            VALUES (\#(project.rowID), \#(settings.firebaseProjectID), \#(settings.clientEmail), \#(settings.privateKeyID),
                    \#(settings.privateKey), \#(settings.tokenURI), \#(settings.upstream), \#(now))
            ON CONFLICT ("projectId") DO UPDATE SET
              "firebaseProjectId" = excluded."firebaseProjectId", "clientEmail" = excluded."clientEmail",
              "privateKeyId" = excluded."privateKeyId", "privateKey" = excluded."privateKey",
              "tokenUri" = excluded."tokenUri", upstream = excluded.upstream\#(unescaped: alsoSetting)
            """#)
    }
}
