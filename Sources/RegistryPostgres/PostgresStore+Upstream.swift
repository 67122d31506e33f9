import Foundation
import PostgresNIO
import Registry

/// Upstream messages on PostgreSQL (see `UpstreamStore`). Servers claim waiting messages with
/// `FOR UPDATE SKIP LOCKED`, so two never hold the same one and neither waits for the other; a
/// project's bound is counted under a transaction-scoped advisory lock of the project's, so two
/// servers adding at once cannot both pass it.
extension PostgresStore: UpstreamStore {
    /// The advisory lock class of a project's upstream queue (the other key is the project's id).
    static let upstreamLock: Int32 = 0x5550

    public func addUpstream(_ message: UpstreamMessage, project: Int64, limit: Int, now: Date) async throws -> Int64? {
        let now = EpochMilliseconds.milliseconds(now)
        return try await transaction { connection in
            try await connection.run(#"SELECT pg_advisory_xact_lock(\#(Self.upstreamLock), \#(Int32(truncatingIfNeeded: project)))"#)
            let waiting = try await connection.one(Self.waiting(project: project, now: now), as: Int.self)
            guard waiting < limit else { return nil }
            return try await connection.one(
                #"""
                INSERT INTO "upstreamMessage" ("projectId", "messageId", json, "isReceipt", "createdAt")
                VALUES (\#(project), \#(message.messageID), \#(message.json), \#(message.isReceipt), \#(now)) RETURNING id
                """#, as: Int64.self)
        }
    }

    public func claimUpstream(room: [Int64: Int], holder: String, lease: Duration) async throws -> [HeldUpstream] {
        try await transaction { connection in
            let now = EpochMilliseconds.now()
            let lease = now + EpochMilliseconds.milliseconds(lease)
            var held: [HeldUpstream] = []
            for (project, count) in room.sorted(by: { $0.key < $1.key }) where count > 0 {
                let rows = try await connection.query(
                    #"""
                    UPDATE "upstreamMessage" SET "heldBy" = \#(holder), "heldUntil" = \#(lease)
                    WHERE id = ANY(ARRAY(
                      SELECT id FROM "upstreamMessage"
                      WHERE "projectId" = \#(project) AND ("heldBy" IS NULL OR "heldUntil" < \#(now))
                      ORDER BY id LIMIT \#(count) FOR UPDATE SKIP LOCKED))
                    RETURNING id, "messageId", json, "isReceipt"
                    """#, logger: .silent)
                var claimed: [HeldUpstream] = []
                for try await (id, messageID, json, isReceipt) in rows.decode((Int64, String, String, Bool).self) {
                    claimed.append(
                        HeldUpstream(
                            id: id, project: project, message: UpstreamMessage(messageID: messageID, json: json, isReceipt: isReceipt)))
                }
                // RETURNING follows no order: oldest first, as they waited.
                held += claimed.sorted { $0.id < $1.id }
            }
            return held
        }
    }

    public func removeUpstream(_ ids: [Int64]) async throws {
        guard !ids.isEmpty else { return }
        try await database.withConnection { connection in
            try await connection.run(#"DELETE FROM "upstreamMessage" WHERE id = ANY(\#(ids))"#)
        }
    }

    public func releaseUpstream(_ ids: [Int64], holder: String) async throws {
        guard !ids.isEmpty else { return }
        try await database.withConnection { connection in
            try await connection.run(
                #"""
                UPDATE "upstreamMessage" SET "heldBy" = NULL, "heldUntil" = NULL
                WHERE id = ANY(\#(ids)) AND "heldBy" = \#(holder)
                """#)
        }
    }

    public func renewUpstream(_ ids: [Int64], holder: String, lease: Duration) async throws {
        guard !ids.isEmpty else { return }
        try await database.withConnection { connection in
            let lease = EpochMilliseconds.now() + EpochMilliseconds.milliseconds(lease)
            try await connection.run(
                #"UPDATE "upstreamMessage" SET "heldUntil" = \#(lease) WHERE id = ANY(\#(ids)) AND "heldBy" = \#(holder)"#)
        }
    }

    public func waitingUpstream(project: Int64?, now: Date) async throws -> Int {
        let now = EpochMilliseconds.milliseconds(now)
        return try await database.withConnection { connection in
            if let project { return try await connection.one(Self.waiting(project: project, now: now), as: Int.self) }
            return try await connection.one(
                #"SELECT COUNT(*)::bigint FROM "upstreamMessage" WHERE "heldBy" IS NULL OR "heldUntil" < \#(now)"#, as: Int.self)
        }
    }

    private static func waiting(project: Int64, now: Int64) -> PostgresQuery {
        #"""
        SELECT COUNT(*)::bigint FROM "upstreamMessage"
        WHERE "projectId" = \#(project) AND ("heldBy" IS NULL OR "heldUntil" < \#(now))
        """#
    }
}
