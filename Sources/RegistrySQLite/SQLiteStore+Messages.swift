import Audience
import Foundation
import GRDB
import Registry

/// The message log: one `message` row per accepted message, and per project a `messageLog` row
/// with the entries and bytes it holds, so that the bounds are checked without a scan.
extension SQLiteStore {
    public func appendMessage(_ message: AcceptedMessage, body: String, entries: Int, bytes: Int) async throws {
        var serialized: [UInt8] = []
        message.recipients.serialize(into: &serialized)
        let recipients = Data(serialized)
        let size = body.utf8.count + recipients.count
        let project = message.project.rowID
        try await write { db, _ in
            try db.cachedStatement(
                sql: """
                    INSERT INTO message (projectId, messageId, protocol, target, body, recipientCount, recipients, bytes, receivedAt)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """
            ).execute(arguments: [
                project, message.id, message.via.rawValue, message.message.targetDescription, body,
                message.recipients.count, recipients, size, Clock.milliseconds(message.receivedAt),
            ])
            try db.cachedStatement(
                sql: """
                    INSERT INTO messageLog (projectId, entries, bytes) VALUES (?, 1, ?)
                    ON CONFLICT (projectId) DO UPDATE SET entries = entries + 1, bytes = bytes + excluded.bytes
                    """
            ).execute(arguments: [project, size])
            try Self.evictOldMessages(db, project: project, entries: entries, bytes: bytes)
        }
    }

    /// Deletes the project's oldest entries while the log is over either bound (the newest entry stays).
    private static func evictOldMessages(_ db: Database, project: Int64, entries: Int, bytes: Int) throws {
        let usage = try db.cachedStatement(sql: "SELECT entries, bytes FROM messageLog WHERE projectId = ?")
        let oldest = try db.cachedStatement(
            sql: "SELECT id, bytes FROM message WHERE projectId = ? ORDER BY id LIMIT 64")
        while let row = try Row.fetchOne(usage, arguments: [project]) {
            var (count, size): (Int, Int) = (row[0], row[1])
            guard count > entries || (size > bytes && count > 1) else { return }
            var doomed: [Int64] = []
            for victim in try Row.fetchAll(oldest, arguments: [project]) {
                guard count > entries || (size > bytes && count > 1) else { break }
                doomed.append(victim[0])
                count -= 1
                size -= victim[1] as Int
            }
            guard !doomed.isEmpty else { return }
            for id in doomed {
                try db.cachedStatement(sql: "DELETE FROM message WHERE id = ?").execute(arguments: [id])
            }
            try db.cachedStatement(sql: "UPDATE messageLog SET entries = ?, bytes = ? WHERE projectId = ?")
                .execute(arguments: [count, size, project])
        }
    }

    public func messages(_ filter: MessageFilter, in project: Project, before: Int64?, limit: Int, bytes: Int)
        async throws -> Page<LoggedMessage>
    {
        try await read { db in
            let rows = try Row.fetchCursor(
                db.cachedStatement(
                    sql: """
                        SELECT id, messageId, protocol, target, body, recipientCount, recipients, receivedAt
                        FROM message WHERE projectId = ? AND id < ? ORDER BY id DESC
                        """),
                arguments: [project.rowID, before ?? .max])
            var items: [LoggedMessage] = []
            var size = 0
            var last: Int64 = 0
            while let row = try rows.next() {
                if case .reaching(let token) = filter {
                    var blob = [UInt8](row["recipients"] as Data)[...]
                    guard let recipients = try? RoaringBitmap(deserializing: &blob), recipients.contains(token)
                    else { continue }
                }
                let body: String = row["body"]
                if !items.isEmpty && (items.count == limit || size + body.utf8.count > bytes) {
                    return Page(items: items, nextAfter: String(last))
                }
                items.append(
                    LoggedMessage(
                        id: row["messageId"], via: MessageProtocol(rawValue: row["protocol"]) ?? .legacy,
                        target: row["target"], body: body, receivedAt: Clock.date(row["receivedAt"]),
                        recipientCount: row["recipientCount"]))
                size += body.utf8.count
                last = row["id"]
            }
            return Page(items: items, nextAfter: nil)
        }
    }

    public func messageLogUsage() async throws -> [String: (entries: Int, bytes: Int)] {
        try await read { db in
            var usage: [String: (entries: Int, bytes: Int)] = [:]
            for row in try Row.fetchAll(
                db,
                sql: """
                    SELECT project.projectId, messageLog.entries, messageLog.bytes
                    FROM messageLog JOIN project ON project.id = messageLog.projectId
                    """)
            {
                usage[row[0]] = (row[1], row[2])
            }
            return usage
        }
    }
}
