import Foundation
import GRDB
import Registry

extension SQLiteStore: UpstreamStore {
    public func addUpstream(_ message: UpstreamMessage, project: Int64, limit: Int, now: Date) async throws -> Int64? {
        let now = EpochMilliseconds.milliseconds(now)
        return try await write { db, _ in
            // One writer at a time: the count and the insert cannot be raced.
            let waiting = try Self.waiting(db, project: project, now: now)
            guard waiting < limit else { return nil }
            try db.execute(
                sql: """
                    INSERT INTO upstreamMessage (projectId, messageId, json, isReceipt, createdAt)
                    VALUES (?, ?, ?, ?, ?)
                    """, arguments: [project, message.messageID, message.json, message.isReceipt, now])
            return db.lastInsertedRowID
        }
    }

    public func claimUpstream(room: [Int64: Int], holder: String, lease: Duration) async throws -> [HeldUpstream] {
        try await write { db, _ in
            let now = EpochMilliseconds.now()
            let lease = now + EpochMilliseconds.milliseconds(lease)
            var held: [HeldUpstream] = []
            for (project, count) in room.sorted(by: { $0.key < $1.key }) where count > 0 {
                let rows = try Row.fetchAll(
                    db,
                    sql: """
                        SELECT id, messageId, json, isReceipt FROM upstreamMessage
                        WHERE projectId = ? AND (heldBy IS NULL OR heldUntil < ?) ORDER BY id LIMIT ?
                        """, arguments: [project, now, count])
                for row in rows {
                    try db.execute(
                        sql: "UPDATE upstreamMessage SET heldBy = ?, heldUntil = ? WHERE id = ?",
                        arguments: [holder, lease, row["id"] as Int64])
                    held.append(
                        HeldUpstream(
                            id: row["id"], project: project,
                            message: UpstreamMessage(messageID: row["messageId"], json: row["json"], isReceipt: row["isReceipt"])))
                }
            }
            return held
        }
    }

    public func removeUpstream(_ ids: [Int64]) async throws {
        guard !ids.isEmpty else { return }
        let list = Self.jsonList(ids)
        try await write { db, _ in
            try db.execute(sql: "DELETE FROM upstreamMessage WHERE id IN (SELECT value FROM json_each(?))", arguments: [list])
        }
    }

    public func releaseUpstream(_ ids: [Int64], holder: String) async throws {
        guard !ids.isEmpty else { return }
        let list = Self.jsonList(ids)
        try await write { db, _ in
            try db.execute(
                sql: """
                    UPDATE upstreamMessage SET heldBy = NULL, heldUntil = NULL
                    WHERE id IN (SELECT value FROM json_each(?)) AND heldBy = ?
                    """, arguments: [list, holder])
        }
    }

    public func renewUpstream(_ ids: [Int64], holder: String, lease: Duration) async throws {
        guard !ids.isEmpty else { return }
        let list = Self.jsonList(ids)
        try await write { db, _ in
            let lease = EpochMilliseconds.now() + EpochMilliseconds.milliseconds(lease)
            try db.execute(
                sql: "UPDATE upstreamMessage SET heldUntil = ? WHERE id IN (SELECT value FROM json_each(?)) AND heldBy = ?",
                arguments: [lease, list, holder])
        }
    }

    public func waitingUpstream(project: Int64?, now: Date) async throws -> Int {
        let now = EpochMilliseconds.milliseconds(now)
        return try await read { db in
            if let project { return try Self.waiting(db, project: project, now: now) }
            return try Int.fetchOne(
                db, sql: "SELECT COUNT(*) FROM upstreamMessage WHERE heldBy IS NULL OR heldUntil < ?", arguments: [now]) ?? 0
        }
    }

    private static func waiting(_ db: Database, project: Int64, now: Int64) throws -> Int {
        try Int.fetchOne(
            db, sql: "SELECT COUNT(*) FROM upstreamMessage WHERE projectId = ? AND (heldBy IS NULL OR heldUntil < ?)",
            arguments: [project, now]) ?? 0
    }
}
