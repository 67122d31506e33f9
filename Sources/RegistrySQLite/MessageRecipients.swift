import AudienceEngine
import Foundation
import GRDB

/// Whom a logged message reached, as `messageRecipientChunk` rows: one per 65,536-id chunk of
/// token ids, holding that chunk's ids as a serialized bitmap.
enum MessageRecipients {
    /// A recipient set cut into chunks, each serialized: done before the write, off the writer's time.
    static func chunks(of recipients: RoaringBitmap) -> [(chunk: Int64, ids: Data)] {
        recipients.chunks.map { chunk, ids in
            var bytes: [UInt8] = []
            ids.serialize(into: &bytes)
            return (Int64(chunk), Data(bytes))
        }
    }

    static func insert(_ chunks: [(chunk: Int64, ids: Data)], of messageID: Int64, project: Int64, _ db: Database) throws {
        let statement = try db.cachedStatement(
            sql: "INSERT INTO messageRecipientChunk (projectId, chunk, messageId, tokenIds) VALUES (?, ?, ?, ?)")
        for (chunk, ids) in chunks { try statement.execute(arguments: [project, chunk, messageID, ids]) }
    }

    /// Whether a chunk's serialized ids hold `token`.
    static func contains(_ token: UInt32, in blob: Data) -> Bool {
        var bytes = [UInt8](blob)[...]
        return (try? RoaringBitmap(deserializing: &bytes))?.contains(token) ?? false
    }
}
