@testable import AudienceEngine
import Foundation
import GRDB
@testable import Registry
@testable import RegistrySQLite
import TestBackends
import Testing

@Suite("Message log", .onEveryBackend)
struct MessageLogTests {
    /// A message logged before recipients were kept per chunk (`message.recipients` held them all).
    @Test("Messages logged before the chunk index are moved into it, and found by token as before")
    func migratesRecipients() async throws {
        var configuration = Configuration()
        configuration.foreignKeysEnabled = true
        let queue = try DatabaseQueue(configuration: configuration)
        try Migrations.migrator.migrate(queue, upTo: "v4 token URIs, used assertions")
        let recipients = RoaringBitmap([3, 70_000, 70_001, 200_000])
        var bytes: [UInt8] = []
        recipients.serialize(into: &bytes)
        let blob = Data(bytes)
        try await queue.write { db in
            try db.execute(
                sql: "INSERT INTO project (id, projectId, senderId, createdAt) VALUES (1, 'app', '1', 0)")
            try db.execute(
                sql: """
                    INSERT INTO message (projectId, messageId, protocol, target, body, recipientCount, recipients, bytes, receivedAt)
                    VALUES (1, '0:1', 'legacy', '/topics/news', '{}', 4, ?, 10, 0)
                    """, arguments: [blob])
        }
        let store = SQLiteStore(try RegistryDatabase(queue))
        let project = Project(rowID: 1, projectId: "app", senderId: "1")
        let chunks = try await store.database.writer.read { db in
            try Int.fetchAll(db, sql: "SELECT chunk FROM messageRecipientChunk ORDER BY chunk")
        }
        #expect(chunks == [0, 1, 3])
        for (token, found) in [(UInt32(70_001), true), (200_000, true), (70_002, false), (5, false)] {
            let page = try await store.messages(.reaching(token), in: project, before: nil, limit: 10, bytes: 1 << 20)
            #expect(page.items.map(\.id) == (found ? ["0:1"] : []), "token \(token)")
        }
    }

    @Test("Evicting a message takes its recipient chunks with it")
    func evictionCascades() async throws {
        var limits = Limits()
        limits.messageLogEntries = 2
        let (registry, project) = try await makeRegistry(limits: limits)
        _ = try await registry.subscribe([token(1), token(2)], to: "news", in: project)
        for n in 0..<5 {
            var message = Message(target: .topic("news"))
            message.data = ["n": .string("\(n)")]
            _ = try await registry.send(message, via: .legacy, in: project)
        }
        let messages = try await TestBackend.rowCount("message", in: try #require(registry.store as? any RegistryBackend))
        let chunks = try await TestBackend.rowCount("messageRecipientChunk", in: try #require(registry.store as? any RegistryBackend))
        #expect(messages == 2)
        #expect(chunks == 2)
        let reaching = try await registry.loggedMessages(to: token(1), in: project, after: nil, limit: 10)
        #expect(reaching.items.count == 2)
    }
}
