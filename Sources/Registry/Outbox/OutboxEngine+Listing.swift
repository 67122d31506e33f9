import Foundation

/// What users see of the relay, once for every store: a message's counts and deliveries, and a
/// project's queue.
extension OutboxStore where Self: OutboxDriver {
    public func delivery(ofMessage id: String, in project: Project) async throws -> DeliveryCounts? {
        try await loggedJob(ofMessage: id, in: project.rowID).map(DeliveryCounts.init)
    }

    public func deliveries(
        ofMessage id: String, in project: Project, state: DeliveryState, after: Int64?, limit: Int
    ) async throws -> Page<DeliveryEntry>? {
        guard let job = try await loggedJob(ofMessage: id, in: project.rowID) else { return nil }
        // A cancelled job's pending recipients are its cancelled ones, rows and walk alike.
        let stored: DeliveryState
        switch (state, job.cancelled) {
        case (.pending, true): return Page(items: [], nextAfter: nil)
        case (.cancelled, false): return Page(items: [], nextAfter: nil)
        case (.cancelled, true): stored = .pending
        default: stored = state
        }
        var entries: [DeliveryEntry] = []
        let position = after ?? 0
        if position < OutboxListing.walkPositions {
            entries = try await deliveryRows(of: job.id, state: stored, after: position, limit: limit + 1).map {
                var entry = $0
                entry.state = state
                return entry
            }
        }
        // Pending also means not attempted yet: the rest of the recipients, after the cursor.
        if stored == .pending, !job.walked, entries.count <= limit {
            let cursor = max(job.cursor, position - OutboxListing.walkPositions)
            let ids = try await recipientIDs(of: job.id, after: cursor, limit: limit + 1 - entries.count)
            for token in try await walkTokens(ids) {
                entries.append(
                    DeliveryEntry(
                        token: token.value, state: state, error: nil, attempts: 0,
                        position: OutboxListing.walkPositions + token.id))
            }
        }
        // Delivered also means delivered at the first attempt of a walk, which left no row: the
        // recipients up to the cursor without one.
        var resumeAt: Int64?
        if state == .delivered, !job.isDirect, entries.count <= limit {
            (entries, resumeAt) = try await deliveredByWalk(
                of: job.id, upTo: job.cursor, after: max(-1, position - OutboxListing.walkPositions), adding: entries,
                limit: limit)
        }
        guard entries.count > limit else { return Page(items: entries, nextAfter: resumeAt.map { String($0) }) }
        entries.removeLast(entries.count - limit)
        return Page(items: entries, nextAfter: String(entries[entries.count - 1].position))
    }

    /// Adds to `entries` the walked recipients of a message (after `after`, up to `cursor`) that
    /// have no delivery row, until there are `limit + 1`. A page reads at most
    /// `OutboxListing.scanPages` times its size of the walk, so that a message whose recipients
    /// mostly failed answers in bounded time: it then returns the position to go on from.
    private func deliveredByWalk(
        of message: Int64, upTo cursor: Int64, after: Int64, adding entries: [DeliveryEntry], limit: Int
    ) async throws -> (entries: [DeliveryEntry], resumeAt: Int64?) {
        var entries = entries
        var walked = after
        var scanned = 0
        while entries.count <= limit, walked < cursor {
            guard scanned < OutboxListing.scanPages * (limit + 1) else {
                return (entries, OutboxListing.walkPositions + walked)
            }
            let ids = try await recipientIDs(of: message, after: walked, limit: limit + 1).filter { Int64($0) <= cursor }
            guard let last = ids.last else { break }
            scanned += ids.count
            walked = Int64(last)
            let attempted = try await attemptedTokenIDs(of: message, among: ids)
            for token in try await walkTokens(ids.filter { !attempted.contains(Int64($0)) }) {
                entries.append(
                    DeliveryEntry(
                        token: token.value, state: .delivered, error: nil, attempts: 1,
                        position: OutboxListing.walkPositions + token.id))
            }
        }
        return (entries, nil)
    }

    public func relayStatus(of project: Project) async throws -> RelayStatus? {
        let now = EpochMilliseconds.now()
        guard let relay = try await relayRow(of: project.rowID) else { return nil }
        let queue = try await openQueue(of: project.rowID, now: now)
        return RelayStatus(
            projectID: project.projectId, pending: queue.pending, inFlight: queue.inFlight, delivered: relay.delivered,
            failed: relay.failed, pruned: relay.pruned,
            // A pause that has run out is no pause, though the row still holds it.
            pausedUntil: relay.pausedUntil.flatMap { $0 > now ? EpochMilliseconds.date($0) : nil },
            lastError: relay.lastError, lastErrorAt: relay.lastErrorAt.map(EpochMilliseconds.date),
            channel: relay.channel, settings: relay.settings)
    }
}

/// Positions in the deliveries listing.
enum OutboxListing {
    /// Where the listing continues past the delivery rows, into the walk of the recipients:
    /// positions from here on are this plus a token id.
    static let walkPositions: Int64 = 1 << 40
    /// How many times its size of the walk a page of delivered recipients reads, at most.
    static let scanPages = 10
}
