import AudienceEngine
import Foundation
import GRDB
import Registry

/// The relay's settings and outbox (see `OutboxStore`): the `relay`, `outbox` and `delivery`
/// tables of migration v7.
extension SQLiteStore: OutboxStore {
    /// Where the deliveries listing of pending recipients continues past the delivery rows, into
    /// the recipients not attempted yet: positions from here on are this plus a token id.
    static let walkPositions: Int64 = 1 << 40

    // MARK: - Settings

    public func relaySettings() async throws -> [Int64: RelaySettings] {
        try await read { db in
            var settings: [Int64: RelaySettings] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT * FROM relay") {
                settings[row["projectId"]] = Self.serviceAccountSettings(row)
            }
            return settings
        }
    }

    public func setRelay(_ settings: RelaySettings?, for project: Project) async throws {
        try await write { db, _ in
            guard let settings else {
                // Turned off: what is still pending will not be delivered, and says so.
                let now = EpochMilliseconds.now()
                try db.execute(
                    sql: """
                        UPDATE delivery SET state = 'failed', error = 'RELAY_OFF', nextAttemptAt = NULL, updatedAt = ?
                        WHERE state = 'pending' AND messageId IN
                          (SELECT messageId FROM outbox WHERE projectId = ? AND finishedAt IS NULL)
                        """, arguments: [now, project.rowID])
                try db.execute(
                    sql: """
                        UPDATE outbox SET failed = recipients - delivered, finishedAt = ?, claimedBy = NULL
                        WHERE projectId = ? AND finishedAt IS NULL
                        """, arguments: [now, project.rowID])
                try db.execute(sql: "DELETE FROM relay WHERE projectId = ?", arguments: [project.rowID])
                return
            }
            try Self.storeServiceAccountSettings(settings, of: project, in: "relay", alsoSetting: ", pausedUntil = NULL", db)
        }
    }

    /// A `relay` or `mirror` row's service account and upstream: both tables keep them alike.
    static func serviceAccountSettings(_ row: Row) -> RelaySettings {
        RelaySettings(
            firebaseProjectID: row["firebaseProjectId"], clientEmail: row["clientEmail"], privateKeyID: row["privateKeyId"],
            privateKey: row["privateKey"], tokenURI: row["tokenUri"], upstream: row["upstream"])
    }

    /// Inserts or replaces the project's service account and upstream in `table` (`relay` or
    /// `mirror`, never a value from outside); `alsoSetting` is more of the update's SET clause.
    static func storeServiceAccountSettings(
        _ settings: RelaySettings, of project: Project, in table: String, alsoSetting: String = "", _ db: Database
    ) throws {
        try db.execute(
            sql: """
                INSERT INTO \(table) (projectId, firebaseProjectId, clientEmail, privateKeyId, privateKey, tokenUri, upstream, createdAt)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (projectId) DO UPDATE SET
                  firebaseProjectId = excluded.firebaseProjectId, clientEmail = excluded.clientEmail,
                  privateKeyId = excluded.privateKeyId, privateKey = excluded.privateKey,
                  tokenUri = excluded.tokenUri, upstream = excluded.upstream\(alsoSetting)
                """,
            arguments: [
                project.rowID, settings.firebaseProjectID, settings.clientEmail, settings.privateKeyID, settings.privateKey,
                settings.tokenURI, settings.upstream, EpochMilliseconds.now(),
            ])
    }

    // MARK: - Taking messages

    public func enqueue(
        _ message: AcceptedMessage, body: String, template: String, deadline: Date, direct: [String]?,
        claimant: String?, leaseUntil: Date, bounds: OutboxBounds
    ) async throws -> Int64 {
        let chunks = RecipientChunks.chunks(of: message.recipients)
        let project = message.project.rowID
        return try await write { db, _ in
            let open =
                try Int.fetchOne(
                    db.cachedStatement(sql: "SELECT COUNT(*) FROM outbox WHERE projectId = ? AND finishedAt IS NULL"),
                    arguments: [project]) ?? 0
            guard open < bounds.outboxMessages else { throw OutboxFull() }
            let row = try Self.insertMessage(
                message, body: body, chunks: chunks, entries: bounds.logEntries, bytes: bounds.logBytes, db)
            let now = EpochMilliseconds.now()
            try db.cachedStatement(
                sql: """
                    INSERT INTO outbox (messageId, projectId, template, direct, recipients, walked, claimedBy, leaseUntil,
                      notBefore, deadline, createdAt)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """
            ).execute(arguments: [
                row, project, template, direct != nil, direct?.count ?? message.recipients.count, direct != nil,
                claimant, claimant == nil ? nil : EpochMilliseconds.milliseconds(leaseUntil), now, EpochMilliseconds.milliseconds(deadline),
                now,
            ])
            if let direct {
                let lookup = try db.cachedStatement(sql: "SELECT id FROM token WHERE projectId = ? AND value = ?")
                let insert = try db.cachedStatement(
                    sql: """
                        INSERT INTO delivery (messageId, tokenId, token, state, attempts, nextAttemptAt, updatedAt)
                        VALUES (?, ?, ?, 'pending', 0, ?, ?)
                        """)
                for token in direct {
                    let id = try Int64.fetchOne(lookup, arguments: [project, token])
                    try insert.execute(arguments: [row, id, id == nil ? token : nil, now, now])
                }
            }
            return row
        }
    }

    // MARK: - Working the outbox

    public func claim(_ claimant: String, leaseUntil: Date, now: Date, limit: Int, skipping: Set<Int64>) async throws
        -> [OutboxJob]
    {
        let time = EpochMilliseconds.milliseconds(now)
        let skipped = Self.jsonList(skipping.sorted())
        return try await write { db, _ in
            let ids = try Int64.fetchAll(
                db,
                sql: """
                    SELECT outbox.messageId FROM outbox JOIN relay ON relay.projectId = outbox.projectId
                    WHERE outbox.finishedAt IS NULL AND outbox.notBefore <= ?
                      AND (outbox.claimedBy IS NULL OR outbox.leaseUntil < ?)
                      AND (relay.pausedUntil IS NULL OR relay.pausedUntil <= ?)
                      AND outbox.projectId NOT IN (SELECT value FROM json_each(?))
                    ORDER BY outbox.notBefore, outbox.messageId LIMIT ?
                    """, arguments: [time, time, time, skipped, limit])
            var jobs: [OutboxJob] = []
            for id in ids {
                try db.execute(
                    sql: "UPDATE outbox SET claimedBy = ?, leaseUntil = ? WHERE messageId = ?",
                    arguments: [claimant, EpochMilliseconds.milliseconds(leaseUntil), id])
                if let job = try Self.job(id, db) { jobs.append(job) }
            }
            return jobs
        }
    }

    static func job(_ id: Int64, _ db: Database) throws -> OutboxJob? {
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

    public func nextAttempts(of job: OutboxJob, after inFlight: AttemptPage?, now: Date, limit: Int) async throws
        -> AttemptPage
    {
        let time = EpochMilliseconds.milliseconds(now)
        let sending = Set(inFlight?.attempts.compactMap(\.deliveryID) ?? [])
        return try await read { db in
            var attempts: [DeliveryAttempt] = []
            for row in try Row.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT delivery.id, delivery.tokenId, COALESCE(delivery.token, token.value) AS value, delivery.attempts
                        FROM delivery LEFT JOIN token ON token.id = delivery.tokenId
                        WHERE delivery.messageId = ? AND delivery.state = 'pending' AND delivery.nextAttemptAt <= ?
                        ORDER BY delivery.nextAttemptAt LIMIT ?
                        """), arguments: [job.id, time, limit + sending.count])
            where attempts.count < limit && !sending.contains(row["id"]) {
                attempts.append(
                    DeliveryAttempt(
                        token: row["value"] ?? "", tokenID: row["tokenId"], attempts: row["attempts"],
                        deliveryID: row["id"]))
            }
            var cursor: Int64
            let walked: Bool
            if let inFlight {
                (cursor, walked) = (inFlight.cursor, inFlight.walked)
            } else if let walk = try Row.fetchOne(
                db, sql: "SELECT cursor, walked FROM outbox WHERE messageId = ?", arguments: [job.id])
            {
                (cursor, walked) = (walk["cursor"], walk["walked"])
            } else {
                return AttemptPage(attempts: attempts, alreadyGone: [], cursor: -1, walked: true)
            }
            guard !walked, attempts.count < limit else {
                return AttemptPage(attempts: attempts, alreadyGone: [], cursor: cursor, walked: walked)
            }
            let room = limit - attempts.count
            let ids = try Self.recipients(of: job.id, after: cursor, limit: room + 1, db)
            let page = Array(ids.prefix(room))
            var gone: [DeliveryAttempt] = []
            if !page.isEmpty {
                for token in try Self.tokens(page, db) {
                    let attempt = DeliveryAttempt(token: token.value, tokenID: token.id, attempts: 0, deliveryID: nil)
                    if token.isRegistered { attempts.append(attempt) } else { gone.append(attempt) }
                }
                cursor = Int64(page.last!)
            }
            return AttemptPage(attempts: attempts, alreadyGone: gone, cursor: cursor, walked: ids.count <= room)
        }
    }

    /// Up to `limit` recipient ids of a logged message after `cursor` (-1: from the start), ascending.
    static func recipients(of message: Int64, after cursor: Int64, limit: Int, _ db: Database) throws -> [UInt32] {
        // A position from a page token the client made up may be past every token id.
        guard cursor < Int64(UInt32.max) else { return [] }
        let first = cursor < 0 ? 0 : Int64(RoaringBitmap.chunk(of: UInt32(cursor)))
        let chunks = try Row.fetchCursor(
            db.cachedStatement(
                sql: "SELECT tokenIds FROM messageRecipientChunk WHERE messageId = ? AND chunk >= ? ORDER BY chunk"),
            arguments: [message, first])
        var ids: [UInt32] = []
        while ids.count < limit, let row = try chunks.next() {
            var bytes = [UInt8](row[0] as Data)[...]
            guard let chunk = try? RoaringBitmap(deserializing: &bytes) else { continue }
            ids += chunk.ids(after: cursor < 0 ? nil : UInt32(cursor), limit: limit - ids.count)
        }
        return ids
    }

    public func record(
        _ outcomes: [DeliveryOutcome], of job: OutboxJob, page: AttemptPage, claimant: String, leaseUntil: Date,
        now: Date
    ) async throws -> JobProgress? {
        let time = EpochMilliseconds.milliseconds(now)
        return try await write { db, _ in
            // Only the claim's holder records: a server whose lease was taken over stops here.
            guard
                try String.fetchOne(
                    db.cachedStatement(sql: "SELECT claimedBy FROM outbox WHERE messageId = ? AND finishedAt IS NULL"),
                    arguments: [job.id]) == claimant
            else { return nil }
            let update = try db.cachedStatement(
                sql: """
                    UPDATE delivery SET state = ?, error = ?, attempts = ?, nextAttemptAt = ?, updatedAt = ?
                    WHERE id = ?
                    """)
            let insert = try db.cachedStatement(
                sql: """
                    INSERT INTO delivery (messageId, tokenId, token, state, error, attempts, nextAttemptAt, updatedAt)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    """)
            var delivered = 0
            var failed = 0
            var lastError: String?
            for outcome in outcomes {
                let attempts = outcome.attemptsAfter
                let next = outcome.nextAttemptAt.map(EpochMilliseconds.milliseconds)
                let error = outcome.error
                if let id = outcome.attempt.deliveryID {
                    try update.execute(arguments: [outcome.state.rawValue, error, attempts, next, time, id])
                } else if outcome.state == .delivered && !job.isDirect {
                    // Delivered at the first attempt of a walk: the cursor says so, no row does
                    // (a send to a million subscribers writes its failures, not a million rows).
                } else {
                    let tokenID = outcome.attempt.tokenID
                    try insert.execute(arguments: [
                        job.id, tokenID, tokenID == nil ? outcome.attempt.token : nil, outcome.state.rawValue, error,
                        attempts, next, time,
                    ])
                }
                switch outcome.state {
                case .delivered: delivered += 1
                case .failed: failed += 1
                case .pending: break
                }
                if let error { lastError = error }
            }
            let waiting = try Row.fetchOne(
                db.cachedStatement(
                    sql: "SELECT COUNT(*), MIN(nextAttemptAt) FROM delivery WHERE messageId = ? AND state = 'pending'"),
                arguments: [job.id])
            let pending: Int = waiting?[0] ?? 0
            let finished = page.walked && pending == 0
            try db.cachedStatement(
                sql: """
                    UPDATE outbox SET cursor = ?, walked = ?, delivered = delivered + ?, failed = failed + ?,
                      leaseUntil = ?, finishedAt = ?, claimedBy = CASE WHEN ? THEN NULL ELSE claimedBy END
                    WHERE messageId = ?
                    """
            ).execute(arguments: [
                page.cursor, page.walked, delivered, failed, EpochMilliseconds.milliseconds(leaseUntil), finished ? time : nil,
                finished, job.id,
            ])
            try db.cachedStatement(
                sql: """
                    UPDATE relay SET delivered = delivered + ?, failed = failed + ?, lastError = COALESCE(?, lastError)
                    WHERE projectId = ?
                    """
            ).execute(arguments: [delivered, failed, lastError, job.project])
            return JobProgress(finished: finished, nextRetryAt: (waiting?[1] as Int64?).map(EpochMilliseconds.date))
        }
    }

    public func renew(_ job: OutboxJob, claimant: String, leaseUntil: Date) async throws -> Bool {
        try await write { db, _ in
            try db.execute(
                sql: "UPDATE outbox SET leaseUntil = ? WHERE messageId = ? AND claimedBy = ? AND finishedAt IS NULL",
                arguments: [EpochMilliseconds.milliseconds(leaseUntil), job.id, claimant])
            return db.changesCount > 0
        }
    }

    public func releaseAll(claimedBy claimant: String) async throws {
        try await write { db, _ in
            try db.execute(
                sql: "UPDATE outbox SET claimedBy = NULL, leaseUntil = NULL WHERE claimedBy = ? AND finishedAt IS NULL",
                arguments: [claimant])
        }
    }

    public func release(_ job: OutboxJob, claimant: String, notBefore: Date) async throws {
        try await write { db, _ in
            try db.execute(
                sql: """
                    UPDATE outbox SET claimedBy = NULL, leaseUntil = NULL, notBefore = ?
                    WHERE messageId = ? AND claimedBy = ?
                    """, arguments: [EpochMilliseconds.milliseconds(notBefore), job.id, claimant])
        }
    }

    public func pause(project: Int64, until: Date?, error: String?) async throws {
        try await write { db, _ in
            try db.execute(
                sql: "UPDATE relay SET pausedUntil = ?, lastError = COALESCE(?, lastError) WHERE projectId = ?",
                arguments: [until.map(EpochMilliseconds.milliseconds), error, project])
        }
    }

    public func countPruned(project: Int64, tokens: Int) async throws {
        try await write { db, _ in
            try db.execute(
                sql: "UPDATE relay SET pruned = pruned + ? WHERE projectId = ?", arguments: [tokens, project])
        }
    }

    // MARK: - What users see

    public func delivery(ofMessage id: String, in project: Project) async throws -> DeliveryCounts? {
        try await read { db in
            try Row.fetchOne(
                db,
                sql: """
                    SELECT outbox.recipients, outbox.delivered, outbox.failed
                    FROM message JOIN outbox ON outbox.messageId = message.id
                    WHERE message.projectId = ? AND message.messageId = ?
                    """, arguments: [project.rowID, id]
            ).map { row in
                let (recipients, delivered, failed): (Int, Int, Int) = (row[0], row[1], row[2])
                return DeliveryCounts(pending: recipients - delivered - failed, delivered: delivered, failed: failed)
            }
        }
    }

    public func deliveries(
        ofMessage id: String, in project: Project, state: DeliveryState, after: Int64?, limit: Int
    ) async throws -> Page<DeliveryEntry>? {
        try await read { db in
            guard
                let job = try Row.fetchOne(
                    db,
                    sql: """
                        SELECT outbox.messageId, outbox.cursor, outbox.walked, outbox.direct
                        FROM message JOIN outbox ON outbox.messageId = message.id
                        WHERE message.projectId = ? AND message.messageId = ?
                        """, arguments: [project.rowID, id])
            else { return nil }
            let row: Int64 = job["messageId"]
            var entries: [DeliveryEntry] = []
            let position = after ?? 0
            if position < Self.walkPositions {
                for item in try Row.fetchAll(
                    db,
                    sql: """
                        SELECT delivery.id, COALESCE(delivery.token, token.value) AS value, delivery.error, delivery.attempts
                        FROM delivery LEFT JOIN token ON token.id = delivery.tokenId
                        WHERE delivery.messageId = ? AND delivery.state = ? AND delivery.id > ?
                        ORDER BY delivery.id LIMIT ?
                        """, arguments: [row, state.rawValue, position, limit + 1])
                {
                    entries.append(
                        DeliveryEntry(
                            token: item["value"] ?? "", state: state, error: item["error"], attempts: item["attempts"],
                            position: item["id"]))
                }
            }
            // Pending also means not attempted yet: the rest of the recipients, after the cursor.
            if state == .pending, !(job["walked"] as Bool), entries.count <= limit {
                let cursor = max(job["cursor"] as Int64, position - Self.walkPositions)
                let ids = try Self.recipients(of: row, after: cursor, limit: limit + 1 - entries.count, db)
                for token in try Self.tokens(ids, db) {
                    entries.append(
                        DeliveryEntry(
                            token: token.value, state: .pending, error: nil, attempts: 0,
                            position: Self.walkPositions + token.id))
                }
            }
            // Delivered also means delivered at the first attempt of a walk, which left no row:
            // the recipients up to the cursor without one.
            var resumeAt: Int64?
            if state == .delivered, !(job["direct"] as Bool), entries.count <= limit {
                (entries, resumeAt) = try Self.deliveredByWalk(
                    of: row, upTo: job["cursor"], after: max(-1, position - Self.walkPositions), adding: entries,
                    limit: limit, db)
            }
            guard entries.count > limit else { return Page(items: entries, nextAfter: resumeAt.map { String($0) }) }
            entries.removeLast(entries.count - limit)
            return Page(items: entries, nextAfter: String(entries[entries.count - 1].position))
        }
    }

    /// Adds to `entries` the walked recipients of a message (after `after`, up to `cursor`) that
    /// have no delivery row, until there are `limit + 1`. A page reads at most `scanPages` times
    /// its size of the walk, so that a message whose recipients mostly failed answers in bounded
    /// time: it then returns the position to go on from.
    static func deliveredByWalk(
        of message: Int64, upTo cursor: Int64, after: Int64, adding entries: [DeliveryEntry], limit: Int, _ db: Database
    ) throws -> (entries: [DeliveryEntry], resumeAt: Int64?) {
        var entries = entries
        var walked = after
        var scanned = 0
        while entries.count <= limit, walked < cursor {
            guard scanned < scanPages * (limit + 1) else { return (entries, walkPositions + walked) }
            let ids = try recipients(of: message, after: walked, limit: limit + 1, db).filter { Int64($0) <= cursor }
            guard let last = ids.last else { break }
            scanned += ids.count
            walked = Int64(last)
            let attempted = Set(
                try Int64.fetchAll(
                    db.cachedStatement(
                        sql: "SELECT tokenId FROM delivery WHERE messageId = ? AND tokenId IN (SELECT value FROM json_each(?))"),
                    arguments: [message, jsonList(ids)]))
            for token in try tokens(ids.filter { !attempted.contains(Int64($0)) }, db) {
                entries.append(
                    DeliveryEntry(
                        token: token.value, state: .delivered, error: nil, attempts: 1, position: walkPositions + token.id))
            }
        }
        return (entries, nil)
    }

    /// The tokens of a walk's ids, in id order (an id whose token is gone has none).
    static func tokens(_ ids: [UInt32], _ db: Database) throws -> [(id: Int64, value: String, isRegistered: Bool)] {
        guard !ids.isEmpty else { return [] }
        return try Row.fetchAll(
            db.cachedStatement(sql: "SELECT id, value, state FROM token WHERE id IN (SELECT value FROM json_each(?)) ORDER BY id"),
            arguments: [jsonList(ids)]
        ).map { ($0["id"], $0["value"], ($0["state"] as String) == "registered") }
    }

    /// How many times its size of the walk a page of delivered recipients reads, at most.
    static let scanPages = 10

    public func relayStatus(of project: Project) async throws -> RelayStatus? {
        let now = EpochMilliseconds.now()
        return try await read { db in
            guard let relay = try Row.fetchOne(db, sql: "SELECT * FROM relay WHERE projectId = ?", arguments: [project.rowID])
            else { return nil }
            let queue = try Row.fetchOne(
                db,
                sql: """
                    SELECT COALESCE(SUM(recipients - delivered - failed), 0),
                      COALESCE(SUM(claimedBy IS NOT NULL AND leaseUntil >= ?), 0)
                    FROM outbox WHERE projectId = ? AND finishedAt IS NULL
                    """, arguments: [now, project.rowID])
            let paused: Int64? = relay["pausedUntil"]
            return RelayStatus(
                projectID: project.projectId, pending: queue?[0] ?? 0, inFlight: queue?[1] ?? 0,
                delivered: relay["delivered"], failed: relay["failed"], pruned: relay["pruned"],
                pausedUntil: paused.flatMap { $0 > now ? EpochMilliseconds.date($0) : nil }, lastError: relay["lastError"],
                firebaseProjectID: relay["firebaseProjectId"], upstream: relay["upstream"])
        }
    }
}
