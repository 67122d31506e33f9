import AudienceEngine
import Foundation
import GRDB

/// Whom a logged message reached, as `messageRecipientChunk` rows: one per 65,536-id chunk of
/// token ids, holding that chunk's ids as a serialized bitmap.
enum MessageRecipients {
    static func insert(_ recipients: RoaringBitmap, of messageID: Int64, project: Int64, _ db: Database) throws {
        let statement = try db.cachedStatement(
            sql: "INSERT INTO messageRecipientChunk (projectId, chunk, messageId, tokenIds) VALUES (?, ?, ?, ?)")
        for (chunk, ids) in recipients.chunks {
            var bytes: [UInt8] = []
            ids.serialize(into: &bytes)
            try statement.execute(arguments: [project, Int64(chunk), messageID, Data(bytes)])
        }
    }

    /// Whether a chunk's serialized ids hold `token`.
    static func contains(_ token: UInt32, in blob: Data) -> Bool {
        var bytes = [UInt8](blob)[...]
        return (try? RoaringBitmap(deserializing: &bytes))?.contains(token) ?? false
    }
}
