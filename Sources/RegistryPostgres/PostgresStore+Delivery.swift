import AudienceEngine
import Foundation
import PostgresNIO
import Registry

/// What users see of the relay: a message's counts and deliveries, and a project's queue.
extension PostgresStore {
    public func delivery(ofMessage id: String, in project: Project) async throws -> DeliveryCounts? {
        let counts = try await database.withConnection { connection in
            try await connection.first(
                #"""
                SELECT outbox.recipients, outbox.delivered, outbox.failed
                FROM message JOIN outbox ON outbox."messageId" = message.id
                WHERE message."projectId" = \#(project.rowID) AND message."messageId" = \#(id)
                """#, as: (Int64, Int64, Int64).self)
        }
        return counts.map { (recipients: Int64, delivered: Int64, failed: Int64) in
            DeliveryCounts(pending: Int(recipients - delivered - failed), delivered: Int(delivered), failed: Int(failed))
        }
    }

    public func deliveries(
        ofMessage id: String, in project: Project, state: DeliveryState, after: Int64?, limit: Int
    ) async throws -> Page<DeliveryEntry>? {
        try await database.withConnection { connection in
            guard
                let (row, cursor, walked, direct) = try await connection.first(
                    #"""
                    SELECT outbox."messageId", outbox.cursor, outbox.walked, outbox.direct
                    FROM message JOIN outbox ON outbox."messageId" = message.id
                    WHERE message."projectId" = \#(project.rowID) AND message."messageId" = \#(id)
                    """#, as: (Int64, Int64, Int64, Bool).self)
            else { return nil }
            var entries: [DeliveryEntry] = []
            let position = after ?? 0
            if position < Self.walkPositions {
                for try await (deliveryID, value, error, attempts) in try await connection.query(
                    #"""
                    SELECT delivery.id, COALESCE(delivery.token, token.value), delivery.error, delivery.attempts
                    FROM delivery LEFT JOIN token ON token.id = delivery."tokenId"
                    WHERE delivery."messageId" = \#(row) AND delivery.state = \#(state.rawValue) AND delivery.id > \#(position)
                    ORDER BY delivery.id LIMIT \#(limit + 1)
                    """#, logger: .silent
                ).decode((Int64, String?, String?, Int32).self) {
                    entries.append(
                        DeliveryEntry(token: value ?? "", state: state, error: error, attempts: Int(attempts), position: deliveryID))
                }
            }
            // Pending also means not attempted yet: the rest of the recipients, after the cursor.
            if state == .pending, walked == 0, entries.count <= limit {
                let from = max(cursor, position - Self.walkPositions)
                let ids = try await connection.recipients(of: row, after: from, limit: limit + 1 - entries.count)
                for token in try await connection.tokens(ids) {
                    entries.append(
                        DeliveryEntry(token: token.value, state: .pending, error: nil, attempts: 0, position: Self.walkPositions + token.id))
                }
            }
            // Delivered also means delivered at the first attempt of a walk, which left no row:
            // the recipients up to the cursor without one.
            var resumeAt: Int64?
            if state == .delivered, !direct, entries.count <= limit {
                (entries, resumeAt) = try await Self.deliveredByWalk(
                    of: row, upTo: cursor, after: max(-1, position - Self.walkPositions), adding: entries, limit: limit,
                    connection)
            }
            guard entries.count > limit else { return Page(items: entries, nextAfter: resumeAt.map { String($0) }) }
            entries.removeLast(entries.count - limit)
            return Page(items: entries, nextAfter: String(entries[entries.count - 1].position))
        }
    }

    /// Adds to `entries` the walked recipients of a message (after `after`, up to `cursor`) that
    /// have no delivery row, until there are `limit + 1`. A page reads at most `scanPages` times
    /// its size of the walk: it then returns the position to go on from.
    static func deliveredByWalk(
        of message: Int64, upTo cursor: Int64, after: Int64, adding entries: [DeliveryEntry], limit: Int,
        _ connection: PostgresConnection
    ) async throws -> (entries: [DeliveryEntry], resumeAt: Int64?) {
        var entries = entries
        var walked = after
        var scanned = 0
        while entries.count <= limit, walked < cursor {
            guard scanned < scanPages * (limit + 1) else { return (entries, walkPositions + walked) }
            let ids = try await connection.recipients(of: message, after: walked, limit: limit + 1).filter { Int64($0) <= cursor }
            guard let last = ids.last else { break }
            scanned += ids.count
            walked = Int64(last)
            var attempted: Set<Int64> = []
            for try await tokenID in try await connection.query(
                #"""
                SELECT "tokenId" FROM delivery WHERE "messageId" = \#(message) AND "tokenId" = ANY(\#(ids.map { Int32(bitPattern: $0) }))
                """#, logger: .silent
            ).decode(Int32.self) { attempted.insert(Int64(tokenID)) }
            for token in try await connection.tokens(ids.filter { !attempted.contains(Int64($0)) }) {
                entries.append(
                    DeliveryEntry(token: token.value, state: .delivered, error: nil, attempts: 1, position: walkPositions + token.id))
            }
        }
        return (entries, nil)
    }

    public func relayStatus(of project: Project) async throws -> RelayStatus? {
        let now = EpochMilliseconds.now()
        return try await database.withConnection { connection -> RelayStatus? in
            guard
                let (delivered, failed, pruned, paused, lastError, firebase, upstream) = try await connection.first(
                    #"""
                    SELECT delivered, failed, pruned, "pausedUntil", "lastError", "firebaseProjectId", upstream
                    FROM relay WHERE "projectId" = \#(project.rowID)
                    """#, as: (Int64, Int64, Int64, Int64?, String?, String, String).self)
            else { return nil }
            let (pending, inFlight) = try await connection.first(
                #"""
                SELECT COALESCE(SUM(recipients - delivered - failed), 0)::bigint,
                       COUNT(*) FILTER (WHERE "claimedBy" IS NOT NULL AND "leaseUntil" >= \#(now))
                FROM outbox WHERE "projectId" = \#(project.rowID) AND "finishedAt" IS NULL
                """#, as: (Int64, Int64).self) ?? (Int64(0), Int64(0))
            return RelayStatus(
                projectID: project.projectId, pending: Int(pending), inFlight: Int(inFlight), delivered: Int(delivered),
                failed: Int(failed), pruned: Int(pruned), pausedUntil: paused.flatMap { $0 > now ? EpochMilliseconds.date($0) : nil },
                lastError: lastError, firebaseProjectID: firebase, upstream: upstream)
        }
    }
}
