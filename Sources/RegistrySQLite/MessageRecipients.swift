import AudienceEngine
import Foundation
import GRDB

/// Whom a logged message reached, as `messageRecipientChunk` rows (`RecipientChunks`).
enum MessageRecipients {
    static func insert(_ chunks: [(chunk: Int64, ids: Data)], of messageID: Int64, project: Int64, _ db: Database) throws {
        let statement = try db.cachedStatement(
            sql: "INSERT INTO messageRecipientChunk (projectId, chunk, messageId, tokenIds) VALUES (?, ?, ?, ?)")
        for (chunk, ids) in chunks { try statement.execute(arguments: [project, chunk, messageID, ids]) }
    }
}
