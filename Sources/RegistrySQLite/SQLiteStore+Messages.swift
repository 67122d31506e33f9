import AudienceEngine
import Foundation
import GRDB
import Registry

/// The message log: one `message` row per accepted message, and per project a `messageLog` row
/// with the entries and bytes it holds, so that the bounds are checked without a scan.
extension SQLiteStore: MessageLogStore {
    public func appendMessage(_ message: AcceptedMessage, body: String, entries: Int, bytes: Int) async throws {
        let chunks = RecipientChunks.chunks(of: message.recipients)
        try await write { db, _ in
            _ = try Self.insertMessage(message, body: body, chunks: chunks, entries: entries, bytes: bytes, db)
        }
    }

    /// Logs a message, with its idempotency key when it has one, evicting the project's oldest
    /// while the log is over a bound.
    /// - Throws: `IdempotencyKeyTaken` when the key is already taken.
    /// - Returns: the message row's id.
    static func insertMessage(
        _ message: AcceptedMessage, body: String, chunks: [(chunk: Int64, ids: Data)], entries: Int, bytes: Int,
        _ db: Database
    ) throws -> Int64 {
        let size = body.utf8.count + chunks.reduce(0) { $0 + $1.ids.count }
        let project = message.project.rowID
        if let key = message.idempotency { try takeIdempotencyKey(key, in: project, db) }
        try db.cachedStatement(
            sql: """
                INSERT INTO message (projectId, messageId, protocol, target, body, recipientCount, skippedStale, recipients, bytes, receivedAt)
                VALUES (?, ?, ?, ?, ?, ?, ?, X'', ?, ?)
                """
        ).execute(arguments: [
            project, message.id, message.via.rawValue, message.message.targetDescription, body,
            message.directTokens?.count ?? message.recipients.count, message.skippedStale, size,
            EpochMilliseconds.milliseconds(message.receivedAt),
        ])
        let row = db.lastInsertedRowID
        try MessageRecipients.insert(chunks, of: row, project: project, db)
        try db.cachedStatement(
            sql: """
                INSERT INTO messageLog (projectId, entries, bytes) VALUES (?, 1, ?)
                ON CONFLICT (projectId) DO UPDATE SET entries = entries + 1, bytes = bytes + excluded.bytes
                """
        ).execute(arguments: [project, size])
        try evictOldMessages(db, project: project, entries: entries, bytes: bytes, keeping: row)
        try countMinute(project, .accepted(message), db)
        try db.cachedStatement(
            sql: """
                DELETE FROM minuteStat WHERE (projectId, minute) IN
                  (SELECT projectId, minute FROM minuteStat WHERE minute < ? LIMIT ?)
                """
        ).execute(arguments: [MinuteStats.expiry(at: EpochMilliseconds.now()), MinuteStats.purgeLimit])
        return row
    }

    /// Adds `counts` to the project's row for their minute: one statement.
    static func countMinute(_ project: Int64, _ counts: MinuteStats, _ db: Database) throws {
        guard counts.accepted + counts.delivered + counts.failed + counts.pruned > 0 else { return }
        try db.cachedStatement(
            sql: """
                INSERT INTO minuteStat (projectId, minute, accepted, delivered, failed, pruned)
                VALUES (?, ?, ?, ?, ?, ?)
                ON CONFLICT (projectId, minute) DO UPDATE SET accepted = accepted + excluded.accepted,
                  delivered = delivered + excluded.delivered, failed = failed + excluded.failed,
                  pruned = pruned + excluded.pruned
                """
        ).execute(arguments: [project, counts.minute, counts.accepted, counts.delivered, counts.failed, counts.pruned])
    }

    public func minuteStats(of project: Int64, from: Int64) async throws -> [MinuteStats] {
        try await read { db in
            try Row.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT minute, accepted, delivered, failed, pruned FROM minuteStat
                        WHERE projectId = ? AND minute >= ? ORDER BY minute
                        """), arguments: [project, from]
            ).map { MinuteStats(minute: $0[0], accepted: $0[1], delivered: $0[2], failed: $0[3], pruned: $0[4]) }
        }
    }

    /// Deletes the project's oldest entries while the log is over either bound. The newest entry
    /// stays, and so does every message the relay has not finished delivering: the outbox has its
    /// own bound.
    private static func evictOldMessages(_ db: Database, project: Int64, entries: Int, bytes: Int, keeping newest: Int64)
        throws
    {
        let usage = try db.cachedStatement(sql: "SELECT entries, bytes FROM messageLog WHERE projectId = ?")
        let oldest = try db.cachedStatement(
            sql: """
                SELECT id, bytes FROM message WHERE projectId = ? AND id <> ? AND NOT EXISTS
                  (SELECT 1 FROM outbox WHERE outbox.messageId = message.id AND outbox.finishedAt IS NULL)
                ORDER BY id LIMIT 64
                """)
        while let row = try Row.fetchOne(usage, arguments: [project]) {
            var (count, size): (Int, Int) = (row[0], row[1])
            guard count > entries || (size > bytes && count > 1) else { return }
            var doomed: [Int64] = []
            for victim in try Row.fetchAll(oldest, arguments: [project, newest]) {
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

    /// Newest first. The messages that reached a token are read through `messageRecipientChunk`:
    /// only the messages whose recipients touch the token's chunk, each checked against that chunk.
    public func messages(_ filter: MessageFilter, in project: Project, before: Int64?, limit: Int, bytes: Int)
        async throws -> Page<LoggedMessage>
    {
        try await read { db in
            // The relay's job beside each message (and in a listing by token, the token's delivery
            // row): one query a page, not one a message.
            let columns = """
                message.id, message.messageId, message.protocol, message.target, message.body,
                message.recipientCount, message.skippedStale, message.receivedAt, outbox.messageId AS jobId,
                outbox.recipients AS jobRecipients, outbox.delivered AS jobDelivered, outbox.failed AS jobFailed,
                outbox.cursor AS jobCursor, outbox.walked AS jobWalked, outbox.direct AS jobDirect,
                outbox.finishedAt AS jobFinishedAt, outbox.cancelledAt AS jobCancelledAt
                """
            let rows: RowCursor
            var token: UInt32?
            switch filter {
            case .all:
                rows = try Row.fetchCursor(
                    db.cachedStatement(
                        sql: """
                            SELECT \(columns), NULL AS rowState, NULL AS rowError, NULL AS rowAttempts FROM message
                            LEFT JOIN outbox ON outbox.messageId = message.id
                            WHERE message.projectId = ? AND message.id < ? ORDER BY message.id DESC
                            """),
                    arguments: [project.rowID, before ?? .max])
            case .reaching(let id):
                token = id
                rows = try Row.fetchCursor(
                    db.cachedStatement(
                        sql: """
                            SELECT \(columns), chunk.tokenIds, delivery.state AS rowState, delivery.error AS rowError,
                              delivery.attempts AS rowAttempts
                            FROM messageRecipientChunk AS chunk
                            JOIN message ON message.id = chunk.messageId
                            LEFT JOIN outbox ON outbox.messageId = message.id
                            LEFT JOIN delivery ON delivery.messageId = message.id AND delivery.tokenId = ?
                            WHERE chunk.projectId = ? AND chunk.chunk = ? AND chunk.messageId < ?
                            ORDER BY chunk.messageId DESC
                            """),
                    arguments: [Int64(id), project.rowID, Int64(RoaringBitmap.chunk(of: id)), before ?? .max])
            }
            var items: [LoggedMessage] = []
            var size = 0
            var last: Int64 = 0
            while let row = try rows.next() {
                if let token, !RecipientChunks.contains(token, in: row["tokenIds"]) { continue }
                let body: String = row["body"]
                if !items.isEmpty && (items.count == limit || size + body.utf8.count > bytes) {
                    return Page(items: items, nextAfter: String(last))
                }
                items.append(
                    LoggedMessage(
                        id: row["messageId"], via: MessageProtocol(rawValue: row["protocol"]) ?? .legacy,
                        target: row["target"], body: body, receivedAt: EpochMilliseconds.date(row["receivedAt"]),
                        recipientCount: row["recipientCount"], skippedStale: row["skippedStale"], job: Self.loggedJob(row)))
                size += body.utf8.count
                last = row["id"]
            }
            return Page(items: items, nextAfter: nil)
        }
    }

    /// The listing's `job…` and `row…` columns, when the message has a job.
    private static func loggedJob(_ row: Row) -> LoggedJob? {
        guard let id = row["jobId"] as Int64? else { return nil }
        let state: String? = row["rowState"]
        return LoggedJob(
            id: id, recipients: row["jobRecipients"], delivered: row["jobDelivered"], failed: row["jobFailed"],
            cursor: row["jobCursor"], walked: row["jobWalked"], isDirect: row["jobDirect"],
            finished: row["jobFinishedAt"] as Int64? != nil, cancelled: row["jobCancelledAt"] as Int64? != nil,
            row: state.flatMap(DeliveryState.init(rawValue:)).map {
                TokenDelivery(state: $0, error: row["rowError"], attempts: row["rowAttempts"] ?? 0)
            })
    }

    public func message(_ id: String, in project: Project) async throws -> LoggedMessage? {
        try await read { db in
            try Row.fetchOne(
                db,
                sql: """
                    SELECT messageId, protocol, target, body, recipientCount, skippedStale, receivedAt FROM message
                    WHERE projectId = ? AND messageId = ? ORDER BY id DESC LIMIT 1
                    """, arguments: [project.rowID, id]
            ).map {
                LoggedMessage(
                    id: $0["messageId"], via: MessageProtocol(rawValue: $0["protocol"]) ?? .legacy,
                    target: $0["target"], body: $0["body"], receivedAt: EpochMilliseconds.date($0["receivedAt"]),
                    recipientCount: $0["recipientCount"], skippedStale: $0["skippedStale"])
            }
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
