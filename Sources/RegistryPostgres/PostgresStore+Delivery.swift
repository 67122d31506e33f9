import Foundation
import PostgresNIO
import Registry

/// The statements behind what users see of the relay on PostgreSQL: a message's job, its
/// delivery rows, and a project's relay and queue.
extension PostgresStore {
    public func loggedJob(ofMessage id: String, in project: Int64) async throws -> LoggedJob? {
        try await database.withConnection { connection in
            try await connection.first(
                #"""
                SELECT outbox."messageId", outbox.recipients, outbox.delivered, outbox.failed, outbox.cursor, outbox.walked,
                  outbox.direct, outbox."finishedAt", outbox."cancelledAt"
                FROM message JOIN outbox ON outbox."messageId" = message.id
                WHERE message."projectId" = \#(project) AND message."messageId" = \#(id)
                """#, as: (Int64, Int64, Int64, Int64, Int64, Int64, Bool, Int64?, Int64?).self
            ).map { (row: (Int64, Int64, Int64, Int64, Int64, Int64, Bool, Int64?, Int64?)) -> LoggedJob in
                let (id, recipients, delivered, failed, cursor, walked, direct, finishedAt, cancelledAt) = row
                return LoggedJob(
                    id: id, recipients: Int(recipients), delivered: Int(delivered), failed: Int(failed), cursor: cursor,
                    walked: walked != 0, isDirect: direct, finished: finishedAt != nil, cancelled: cancelledAt != nil)
            }
        }
    }

    public func deliveryRows(of job: Int64, state: DeliveryState, after: Int64, limit: Int) async throws
        -> [DeliveryEntry]
    {
        try await database.withConnection { connection in
            var entries: [DeliveryEntry] = []
            for try await (deliveryID, value, error, attempts) in try await connection.query(
                #"""
                SELECT delivery.id, COALESCE(delivery.token, token.value), delivery.error, delivery.attempts
                FROM delivery LEFT JOIN token ON token.id = delivery."tokenId"
                WHERE delivery."messageId" = \#(job) AND delivery.state = \#(state.rawValue) AND delivery.id > \#(after)
                ORDER BY delivery.id LIMIT \#(limit)
                """#, logger: .silent
            ).decode((Int64, String?, String?, Int32).self) {
                entries.append(
                    DeliveryEntry(token: value ?? "", state: state, error: error, attempts: Int(attempts), position: deliveryID))
            }
            return entries
        }
    }

    public func attemptedTokenIDs(of job: Int64, among ids: [UInt32]) async throws -> Set<Int64> {
        try await database.withConnection { connection in
            var attempted: Set<Int64> = []
            for try await tokenID in try await connection.query(
                #"""
                SELECT "tokenId" FROM delivery WHERE "messageId" = \#(job) AND "tokenId" = ANY(\#(ids.map { Int32(bitPattern: $0) }))
                """#, logger: .silent
            ).decode(Int32.self) { attempted.insert(Int64(tokenID)) }
            return attempted
        }
    }

    public func relayRow(of project: Int64) async throws -> RelayRow? {
        try await database.withConnection { connection in
            try await connection.first(
                #"""
                SELECT delivered, failed, pruned, "pausedUntil", "lastError", "lastErrorAt", channel, settings
                FROM relay WHERE "projectId" = \#(project)
                """#, as: (Int64, Int64, Int64, Int64?, String?, Int64?, String, String).self
            ).map {
                RelayRow(
                    delivered: Int($0.0), failed: Int($0.1), pruned: Int($0.2), pausedUntil: $0.3, lastError: $0.4,
                    lastErrorAt: $0.5, channel: $0.6, settings: ChannelSettings.fields(ofJSON: $0.7))
            }
        }
    }

    public func openQueue(of project: Int64, now: Int64) async throws -> (pending: Int, inFlight: Int) {
        let (pending, inFlight) = try await database.withConnection { connection in
            try await connection.first(
                #"""
                SELECT COALESCE(SUM(recipients - delivered - failed), 0)::bigint,
                       COUNT(*) FILTER (WHERE "claimedBy" IS NOT NULL AND "leaseUntil" >= \#(now))
                FROM outbox WHERE "projectId" = \#(project) AND "finishedAt" IS NULL
                """#, as: (Int64, Int64).self) ?? (Int64(0), Int64(0))
        }
        return (Int(pending), Int(inFlight))
    }
}
