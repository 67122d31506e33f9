import Foundation
import GRDB
import Registry

/// The statements behind what users see of the relay on SQLite: a message's job, its delivery
/// rows, and a project's relay and queue.
extension SQLiteStore {
    public func loggedJob(ofMessage id: String, in project: Int64) async throws -> LoggedJob? {
        try await read { db in
            try Row.fetchOne(
                db,
                sql: """
                    SELECT outbox.messageId, outbox.recipients, outbox.delivered, outbox.failed, outbox.cursor,
                      outbox.walked, outbox.direct, outbox.finishedAt, outbox.cancelledAt
                    FROM message JOIN outbox ON outbox.messageId = message.id
                    WHERE message.projectId = ? AND message.messageId = ?
                    """, arguments: [project, id]
            ).map {
                LoggedJob(
                    id: $0["messageId"], recipients: $0["recipients"], delivered: $0["delivered"], failed: $0["failed"],
                    cursor: $0["cursor"], walked: $0["walked"], isDirect: $0["direct"],
                    finished: $0["finishedAt"] as Int64? != nil, cancelled: $0["cancelledAt"] as Int64? != nil)
            }
        }
    }

    public func deliveryRows(of job: Int64, state: DeliveryState, after: Int64, limit: Int) async throws
        -> [DeliveryEntry]
    {
        try await read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT delivery.id, COALESCE(delivery.token, token.value) AS value, delivery.error, delivery.attempts
                    FROM delivery LEFT JOIN token ON token.id = delivery.tokenId
                    WHERE delivery.messageId = ? AND delivery.state = ? AND delivery.id > ?
                    ORDER BY delivery.id LIMIT ?
                    """, arguments: [job, state.rawValue, after, limit]
            ).map {
                DeliveryEntry(
                    token: $0["value"] ?? "", state: state, error: $0["error"], attempts: $0["attempts"], position: $0["id"])
            }
        }
    }

    public func attemptedTokenIDs(of job: Int64, among ids: [UInt32]) async throws -> Set<Int64> {
        try await read { db in
            Set(
                try Int64.fetchAll(
                    db.cachedStatement(
                        sql: "SELECT tokenId FROM delivery WHERE messageId = ? AND tokenId IN (SELECT value FROM json_each(?))"),
                    arguments: [job, Self.jsonList(ids)]))
        }
    }

    public func relayRow(of project: Int64) async throws -> RelayRow? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM relay WHERE projectId = ?", arguments: [project]).map {
                RelayRow(
                    delivered: $0["delivered"], failed: $0["failed"], pruned: $0["pruned"], pausedUntil: $0["pausedUntil"],
                    lastError: $0["lastError"], lastErrorAt: $0["lastErrorAt"], channel: $0["channel"],
                    settings: ChannelSettings.fields(ofJSON: $0["settings"]))
            }
        }
    }

    public func openQueue(of project: Int64, now: Int64) async throws -> (pending: Int, inFlight: Int) {
        try await read { db in
            let queue = try Row.fetchOne(
                db,
                sql: """
                    SELECT COALESCE(SUM(recipients - delivered - failed), 0),
                      COALESCE(SUM(claimedBy IS NOT NULL AND leaseUntil >= ?), 0)
                    FROM outbox WHERE projectId = ? AND finishedAt IS NULL
                    """, arguments: [now, project])
            return (queue?[0] ?? 0, queue?[1] ?? 0)
        }
    }
}
