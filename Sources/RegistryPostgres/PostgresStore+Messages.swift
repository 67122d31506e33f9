import AudienceEngine
import Foundation
import PostgresNIO
import Registry

/// The message log: one `message` row per accepted message, and per project a `messageLog` row
/// with the entries and bytes it holds. Appending updates that row first, so two servers logging
/// for one project take turns, and its bounds hold across them.
extension PostgresStore: MessageLogStore {
    public func appendMessage(_ message: AcceptedMessage, body: String, entries: Int, bytes: Int) async throws {
        let chunks = RecipientChunks.chunks(of: message.recipients)
        try await transaction { connection in
            _ = try await connection.insertMessage(message, body: body, chunks: chunks, entries: entries, bytes: bytes)
        }
    }

    public func messages(_ filter: MessageFilter, in project: Project, before: Int64?, limit: Int, bytes: Int)
        async throws -> Page<LoggedMessage>
    {
        try await database.withConnection { connection in
            let rows: PostgresRowSequence
            var token: UInt32?
            switch filter {
            case .all:
                rows = try await connection.query(
                    #"""
                    SELECT id, "messageId", protocol, target, body, "recipientCount", "receivedAt", NULL::bytea FROM message
                    WHERE "projectId" = \#(project.rowID) AND id < \#(before ?? .max) ORDER BY id DESC
                    LIMIT \#(limit + 1)
                    """#, logger: .silent)
            case .reaching(let id):
                token = id
                rows = try await connection.query(
                    #"""
                    SELECT message.id, message."messageId", message.protocol, message.target, message.body,
                           message."recipientCount", message."receivedAt", chunk."tokenIds"
                    FROM "messageRecipientChunk" AS chunk JOIN message ON message.id = chunk."messageId"
                    WHERE chunk."projectId" = \#(project.rowID) AND chunk.chunk = \#(Int64(RoaringBitmap.chunk(of: id)))
                      AND chunk."messageId" < \#(before ?? .max)
                    ORDER BY chunk."messageId" DESC
                    """#, logger: .silent)
            }
            var items: [LoggedMessage] = []
            var size = 0
            var last: Int64 = 0
            // Rows are read as they stream; the page ends at its limit or its bytes, and the rest
            // of the answer is dropped with the statement.
            for try await (id, messageID, via, target, body, count, receivedAt, chunk) in rows.decode(
                (Int64, String, String, String, String, Int64, Int64, Data?).self)
            {
                if let token, let chunk, !RecipientChunks.contains(token, in: chunk) { continue }
                if !items.isEmpty && (items.count == limit || size + body.utf8.count > bytes) {
                    return Page(items: items, nextAfter: String(last))
                }
                items.append(
                    LoggedMessage(
                        id: messageID, via: MessageProtocol(rawValue: via) ?? .legacy, target: target, body: body,
                        receivedAt: EpochMilliseconds.date(receivedAt), recipientCount: Int(count)))
                size += body.utf8.count
                last = id
            }
            return Page(items: items, nextAfter: nil)
        }
    }

    public func message(_ id: String, in project: Project) async throws -> LoggedMessage? {
        try await database.withConnection { connection in
            try await connection.first(
                #"""
                SELECT "messageId", protocol, target, body, "recipientCount", "receivedAt" FROM message
                WHERE "projectId" = \#(project.rowID) AND "messageId" = \#(id) ORDER BY id DESC LIMIT 1
                """#, as: (String, String, String, String, Int64, Int64).self
            ).map {
                LoggedMessage(
                    id: $0.0, via: MessageProtocol(rawValue: $0.1) ?? .legacy, target: $0.2, body: $0.3,
                    receivedAt: EpochMilliseconds.date($0.5), recipientCount: Int($0.4))
            }
        }
    }

    public func messageLogUsage() async throws -> [String: (entries: Int, bytes: Int)] {
        try await database.withConnection { connection in
            var usage: [String: (entries: Int, bytes: Int)] = [:]
            for try await (project, entries, bytes) in try await connection.query(
                #"""
                SELECT project."projectId", "messageLog".entries, "messageLog".bytes
                FROM "messageLog" JOIN project ON project.id = "messageLog"."projectId"
                """#, logger: .silent
            ).decode((String, Int64, Int64).self) { usage[project] = (Int(entries), Int(bytes)) }
            return usage
        }
    }
}

extension PostgresConnection {
    /// Logs a message, evicting the project's oldest while the log is over a bound.
    /// - Returns: the message row's id.
    func insertMessage(
        _ message: AcceptedMessage, body: String, chunks: [(chunk: Int64, ids: Data)], entries: Int, bytes: Int
    ) async throws -> Int64 {
        let size = Int64(body.utf8.count + chunks.reduce(0) { $0 + $1.ids.count })
        let project = message.project.rowID
        if let key = message.idempotency { try await takeIdempotencyKey(key, in: project) }
        // The project's counter first: its row lock orders the project's appends across servers.
        guard
            var (count, used) = try await first(
                #"""
                INSERT INTO "messageLog" ("projectId", entries, bytes) VALUES (\#(project), 1, \#(size))
                ON CONFLICT ("projectId") DO UPDATE SET entries = "messageLog".entries + 1, bytes = "messageLog".bytes + excluded.bytes
                RETURNING entries, bytes
                """#, as: (Int64, Int64).self)
        else { throw PostgresStoreError("the message log's counter returned no row") }
        let row = try await one(
            #"""
            INSERT INTO message ("projectId", "messageId", protocol, target, body, "recipientCount", recipients, bytes, "receivedAt")
            VALUES (\#(project), \#(message.id), \#(message.via.rawValue), \#(message.message.targetDescription), \#(body),
                    \#(Int64(message.directTokens?.count ?? message.recipients.count)), ''::bytea, \#(size),
                    \#(EpochMilliseconds.milliseconds(message.receivedAt)))
            RETURNING id
            """#, as: Int64.self)
        for (chunk, ids) in chunks {
            try await run(
                #"""
                INSERT INTO "messageRecipientChunk" ("projectId", chunk, "messageId", "tokenIds")
                VALUES (\#(project), \#(chunk), \#(row), \#(ids))
                """#)
        }
        // The oldest entries go while the log is over a bound; the newest stays, and so does every
        // message the relay has not finished delivering (the outbox has its own bound).
        while count > entries || (used > bytes && count > 1) {
            var doomed: [Int64] = []
            for try await (id, victimSize) in try await query(
                #"""
                SELECT id, bytes FROM message WHERE "projectId" = \#(project) AND id <> \#(row) AND NOT EXISTS
                  (SELECT 1 FROM outbox WHERE outbox."messageId" = message.id AND outbox."finishedAt" IS NULL)
                ORDER BY id LIMIT 64
                """#, logger: .silent
            ).decode((Int64, Int64).self) {
                guard count > entries || (used > bytes && count > 1) else { break }
                doomed.append(id)
                count -= 1
                used -= victimSize
            }
            guard !doomed.isEmpty else { break }
            try await run(#"DELETE FROM message WHERE id = ANY(\#(doomed))"#)
            try await run(#"UPDATE "messageLog" SET entries = \#(count), bytes = \#(used) WHERE "projectId" = \#(project)"#)
        }
        return row
    }
}
