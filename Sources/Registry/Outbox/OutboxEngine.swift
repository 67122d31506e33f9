import AudienceEngine
import Foundation

/// The outbox's rules, once, for every store that drives it: a store conforms to `OutboxDriver`
/// (its statements) and gets `OutboxStore` from here.
extension OutboxStore where Self: OutboxDriver {
    // MARK: - Settings

    public func relaySettings() async throws -> [Int64: ChannelSettings] {
        try await relayRows()
    }

    public func setRelay(_ settings: ChannelSettings?, for project: Project, audit: AuditWrite?) async throws {
        guard let settings else {
            // Turned off: what is still pending will not be delivered, and says so.
            return try await dropRelay(
                of: project.rowID, failingPendingWith: "RELAY_OFF", now: EpochMilliseconds.now(), audit: audit)
        }
        try await storeRelay(settings, of: project, audit: audit)
    }

    // MARK: - Taking messages

    public func enqueue(
        _ message: AcceptedMessage, body: String, template: String, deadline: Date, direct: [String]?,
        claimant: String?, leaseUntil: Date, bounds: OutboxBounds
    ) async throws -> Int64 {
        let now = EpochMilliseconds.now()
        let job = NewOutboxJob(
            message: message, body: body, chunks: RecipientChunks.chunks(of: message.recipients),
            logEntries: bounds.logEntries, logBytes: bounds.logBytes, template: template, direct: direct,
            recipients: direct?.count ?? message.recipients.count,
            // A direct send has all its rows from the start: there is nothing to walk.
            walked: direct != nil, claimant: claimant,
            leaseUntil: claimant == nil ? nil : EpochMilliseconds.milliseconds(leaseUntil), notBefore: now,
            deadline: EpochMilliseconds.milliseconds(deadline), createdAt: now)
        let room = bounds.outboxMessages
        return try await insertJob(job) { unfinished in
            guard unfinished < room else { throw OutboxFull() }
        }
    }

    // MARK: - Working the outbox

    public func claim(_ claimant: String, leaseUntil: Date, now: Date, limit: Int, skipping: Set<Int64>) async throws
        -> [OutboxJob]
    {
        try await claimJobs(
            claimant, leaseUntil: EpochMilliseconds.milliseconds(leaseUntil), now: EpochMilliseconds.milliseconds(now),
            limit: limit, skipping: skipping.sorted())
    }

    public func releaseAll(claimedBy claimant: String) async throws {
        try await releaseJobs(claimedBy: claimant)
    }

    public func nextAttempts(of job: OutboxJob, after inFlight: AttemptPage?, now: Date, limit: Int) async throws
        -> AttemptPage
    {
        // The page in flight's retries are still pending: read past them rather than twice.
        let sending = Set(inFlight?.attempts.compactMap(\.deliveryID) ?? [])
        var attempts = Array(
            try await dueRetries(of: job.id, now: EpochMilliseconds.milliseconds(now), limit: limit + sending.count)
                .filter { !sending.contains($0.deliveryID ?? -1) }.prefix(limit))
        var cursor: Int64
        let walked: Bool
        if let inFlight {
            (cursor, walked) = (inFlight.cursor, inFlight.walked)
        } else if let walk = try await walkState(of: job.id) {
            (cursor, walked) = walk
        } else {
            return AttemptPage(attempts: attempts, alreadyGone: [], cursor: -1, walked: true)
        }
        guard !walked, attempts.count < limit else {
            return AttemptPage(attempts: attempts, alreadyGone: [], cursor: cursor, walked: walked)
        }
        // Retries first; the walk fills the rest of the page. One id more than fits says whether
        // the walk ends with this page.
        let room = limit - attempts.count
        let ids = try await recipientIDs(of: job.id, after: cursor, limit: room + 1)
        let page = Array(ids.prefix(room))
        var gone: [DeliveryAttempt] = []
        if let last = page.last {
            for token in try await walkTokens(page) {
                let attempt = DeliveryAttempt(token: token.value, tokenID: token.id, attempts: 0, deliveryID: nil)
                if token.isRegistered { attempts.append(attempt) } else { gone.append(attempt) }
            }
            cursor = Int64(last)
        }
        return AttemptPage(attempts: attempts, alreadyGone: gone, cursor: cursor, walked: ids.count <= room)
    }

    public func record(
        _ outcomes: [DeliveryOutcome], of job: OutboxJob, page: AttemptPage, claimant: String, leaseUntil: Date,
        now: Date, mayFinish: Bool
    ) async throws -> JobProgress? {
        var rows: [DeliveryRowWrite] = []
        var tally = RelayChange()
        for outcome in outcomes {
            let row = DeliveryRowWrite(
                id: outcome.attempt.deliveryID, tokenID: outcome.attempt.tokenID,
                token: outcome.attempt.tokenID == nil ? outcome.attempt.token : nil, state: outcome.state,
                error: outcome.error, attempts: outcome.attemptsAfter,
                nextAttemptAt: outcome.nextAttemptAt.map(EpochMilliseconds.milliseconds))
            // Delivered at the first attempt of a walk: the cursor says so, no row does (a send to
            // a million subscribers writes its failures, not a million rows).
            if row.id != nil || outcome.state != .delivered || job.isDirect { rows.append(row) }
            switch outcome.state {
            case .delivered: tally.delivered += 1
            case .failed: tally.failed += 1
            case .pending, .cancelled: break
            }
            if let error = outcome.error { tally.lastError = error }
        }
        if tally.lastError != nil { tally.lastErrorAt = EpochMilliseconds.milliseconds(now) }
        // The page's counts also go to their minute's stats, in the same transaction.
        tally.minute = MinuteStats.minute(of: EpochMilliseconds.milliseconds(now))
        var writes = PageWrites(
            job: job.id, project: job.project, claimant: claimant, now: EpochMilliseconds.milliseconds(now), rows: rows,
            cursor: page.cursor, walked: page.walked, leaseUntil: EpochMilliseconds.milliseconds(leaseUntil), tally: tally,
            countsPending: mayFinish)
        // The webhooks' events, written by `recordPage` in the page's own transaction.
        writes.webhookEvents = WebhookEventBatch(outcomes, of: job, page: page, now: writes.now)
        // Finished once every recipient is walked and none waits for a retry.
        let walked = page.walked
        return try await recordPage(writes) { pending in walked && pending == 0 }.map { recorded in
            JobProgress(finished: recorded.finished, nextRetryAt: recorded.nextRetryAt.map(EpochMilliseconds.date))
        }
    }

    public func renew(_ job: OutboxJob, claimant: String, leaseUntil: Date) async throws -> Bool {
        try await renewLease(of: job.id, claimant: claimant, until: EpochMilliseconds.milliseconds(leaseUntil))
    }

    public func release(_ job: OutboxJob, claimant: String, notBefore: Date) async throws {
        try await releaseJob(job.id, claimant: claimant, notBefore: EpochMilliseconds.milliseconds(notBefore))
    }

    public func pause(project: Int64, until: Date?, error: String?) async throws {
        var change = RelayChange()
        change.pausedUntil = .some(until.map(EpochMilliseconds.milliseconds))
        change.lastError = error
        change.lastErrorAt = error.map { _ in EpochMilliseconds.now() }
        try await updateRelay(of: project, change)
    }

    public func countPruned(project: Int64, tokens: Int) async throws {
        var change = RelayChange()
        change.pruned = tokens
        change.minute = MinuteStats.minute(of: EpochMilliseconds.now())
        try await updateRelay(of: project, change)
    }
}

extension OutboxStore {
    /// Turns delivery on or off with no audit entry: copies and tests.
    public func setRelay(_ settings: ChannelSettings?, for project: Project) async throws {
        try await setRelay(settings, for: project, audit: nil)
    }
}
