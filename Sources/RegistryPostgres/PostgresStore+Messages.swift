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
            // The relay's job beside each message (and in a listing by token, the token's delivery
            // row): one query a page, not one a message.
            switch filter {
            case .all:
                rows = try await connection.query(
                    #"""
                    SELECT message.id, message."messageId", message.protocol, message.target, message.body,
                           message."recipientCount", message."skippedStale", message."receivedAt", NULL::bytea,
                           outbox."messageId", outbox.recipients, outbox.delivered, outbox.failed, outbox.cursor,
                           outbox.walked, outbox.direct, outbox."finishedAt", NULL::text, NULL::text, NULL::integer,
                           outbox."cancelledAt"
                    FROM message LEFT JOIN outbox ON outbox."messageId" = message.id
                    WHERE message."projectId" = \#(project.rowID) AND message.id < \#(before ?? .max)
                    ORDER BY message.id DESC LIMIT \#(limit + 1)
                    """#, logger: .silent)
            case .reaching(let id):
                token = id
                rows = try await connection.query(
                    #"""
                    SELECT message.id, message."messageId", message.protocol, message.target, message.body,
                           message."recipientCount", message."skippedStale", message."receivedAt", chunk."tokenIds",
                           outbox."messageId", outbox.recipients, outbox.delivered, outbox.failed, outbox.cursor,
                           outbox.walked, outbox.direct, outbox."finishedAt", delivery.state, delivery.error,
                           delivery.attempts, outbox."cancelledAt"
                    FROM "messageRecipientChunk" AS chunk JOIN message ON message.id = chunk."messageId"
                    LEFT JOIN outbox ON outbox."messageId" = message.id
                    LEFT JOIN delivery
                      ON delivery."messageId" = message.id AND delivery."tokenId" = \#(Int32(bitPattern: id))
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
            for try await (
                id, messageID, via, target, body, count, skippedStale, receivedAt, chunk, job, recipients, delivered,
                failed, cursor, walked, direct, finishedAt, rowState, rowError, rowAttempts, cancelledAt
            ) in rows.decode(
                (
                    Int64, String, String, String, String, Int64, Int64, Int64, Data?, Int64?, Int64?, Int64?, Int64?,
                    Int64?, Int64?, Bool?, Int64?, String?, String?, Int32?, Int64?
                ).self)
            {
                if let token, let chunk, !RecipientChunks.contains(token, in: chunk) { continue }
                if !items.isEmpty && (items.count == limit || size + body.utf8.count > bytes) {
                    return Page(items: items, nextAfter: String(last))
                }
                items.append(
                    LoggedMessage(
                        id: messageID, via: MessageProtocol(rawValue: via) ?? .legacy, target: target, body: body,
                        receivedAt: EpochMilliseconds.date(receivedAt), recipientCount: Int(count),
                        skippedStale: Int(skippedStale), job: job.map { job in
                            LoggedJob(
                                id: job, recipients: Int(recipients ?? 0), delivered: Int(delivered ?? 0),
                                failed: Int(failed ?? 0),
                                cursor: cursor ?? -1, walked: (walked ?? 0) != 0, isDirect: direct ?? false,
                                finished: finishedAt != nil, cancelled: cancelledAt != nil,
                                row: rowState.flatMap(DeliveryState.init(rawValue:)).map {
                                    TokenDelivery(state: $0, error: rowError, attempts: Int(rowAttempts ?? 0))
                                })
                        }))
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
                SELECT "messageId", protocol, target, body, "recipientCount", "receivedAt", "skippedStale" FROM message
                WHERE "projectId" = \#(project.rowID) AND "messageId" = \#(id) ORDER BY id DESC LIMIT 1
                """#, as: (String, String, String, String, Int64, Int64, Int64).self
            ).map {
                LoggedMessage(
                    id: $0.0, via: MessageProtocol(rawValue: $0.1) ?? .legacy, target: $0.2, body: $0.3,
                    receivedAt: EpochMilliseconds.date($0.5), recipientCount: Int($0.4), skippedStale: Int($0.6))
            }
        }
    }

    public func minuteStats(of project: Int64, from: Int64) async throws -> [MinuteStats] {
        try await database.withConnection { connection in
            var minutes: [MinuteStats] = []
            for try await (minute, accepted, delivered, failed, pruned) in try await connection.query(
                #"""
                SELECT minute, accepted, delivered, failed, pruned FROM "minuteStat"
                WHERE "projectId" = \#(project) AND minute >= \#(from) ORDER BY minute
                """#, logger: .silent
            ).decode((Int64, Int64, Int64, Int64, Int64).self) {
                minutes.append(
                    MinuteStats(
                        minute: minute, accepted: Int(accepted), delivered: Int(delivered), failed: Int(failed),
                        pruned: Int(pruned)))
            }
            return minutes
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
            INSERT INTO message ("projectId", "messageId", protocol, target, body, "recipientCount", "skippedStale", recipients, bytes, "receivedAt")
            VALUES (\#(project), \#(message.id), \#(message.via.rawValue), \#(message.message.targetDescription), \#(body),
                    \#(Int64(message.directTokens?.count ?? message.recipients.count)), \#(Int64(message.skippedStale)), ''::bytea, \#(size),
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
        try await countMinute(project, .accepted(message))
        let expired = MinuteStats.expiry(at: EpochMilliseconds.now())
        try await run(
            #"""
            DELETE FROM "minuteStat" WHERE ("projectId", minute) IN
              (SELECT "projectId", minute FROM "minuteStat" WHERE minute < \#(expired) LIMIT \#(MinuteStats.purgeLimit))
            """#)
        return row
    }

    /// Adds `counts` to the project's row for their minute: one statement.
    func countMinute(_ project: Int64, _ counts: MinuteStats) async throws {
        guard counts.accepted + counts.delivered + counts.failed + counts.pruned > 0 else { return }
        try await run(
            #"""
            INSERT INTO "minuteStat" ("projectId", minute, accepted, delivered, failed, pruned)
            VALUES (\#(project), \#(counts.minute), \#(Int64(counts.accepted)), \#(Int64(counts.delivered)),
                    \#(Int64(counts.failed)), \#(Int64(counts.pruned)))
            ON CONFLICT ("projectId", minute) DO UPDATE SET accepted = "minuteStat".accepted + excluded.accepted,
              delivered = "minuteStat".delivered + excluded.delivered, failed = "minuteStat".failed + excluded.failed,
              pruned = "minuteStat".pruned + excluded.pruned
            """#)
    }
}
