import AudienceEngine
import Foundation
import Registry
import RegistryPostgres
import Testing

@Suite("PostgreSQL: the message log", .enabled(if: TestPostgres.available, TestPostgres.skipped))
struct PostgresMessageLogTests {
    func accepted(_ n: Int, to recipients: [UInt32], in project: Project) -> AcceptedMessage {
        AcceptedMessage(
            id: "0:\(n)", project: project, via: .legacy, message: Message(target: .topic("news")),
            recipients: RoaringBitmap(recipients), receivedAt: Date(timeIntervalSince1970: Double(n)))
    }

    @Test("Newest first, by token through the chunk index, paged, and bounded with the oldest evicted")
    func log() async throws {
        try await TestPostgres.withProject { store, project in
            for n in 1...5 {
                try await store.appendMessage(
                    accepted(n, to: n.isMultiple(of: 2) ? [3, 70_001] : [3], in: project), body: "{\"n\":\(n)}",
                    entries: 4, bytes: 1 << 20)
            }
            let all = try await store.messages(.all, in: project, before: nil, limit: 3, bytes: 1 << 20)
            #expect(all.items.map(\.id) == ["0:5", "0:4", "0:3"])
            let rest = try await store.messages(.all, in: project, before: all.nextAfter.flatMap(Int64.init), limit: 3, bytes: 1 << 20)
            #expect(rest.items.map(\.id) == ["0:2"])
            let reaching = try await store.messages(.reaching(70_001), in: project, before: nil, limit: 10, bytes: 1 << 20)
            #expect(reaching.items.map(\.id) == ["0:4", "0:2"])
            #expect(try await store.message("0:3", in: project)?.body == "{\"n\":3}")
            #expect(try await store.message("0:1", in: project) == nil)
            let usage = try #require(try await store.messageLogUsage()["pg-app"])
            #expect(usage.entries == 4)
        }
    }

    @Test("Thirty appends at once keep the bound")
    func concurrent() async throws {
        try await TestPostgres.withProject { store, project in
            try await withThrowingTaskGroup(of: Void.self) { group in
                for n in 0..<30 {
                    group.addTask {
                        try await store.appendMessage(self.accepted(n, to: [1], in: project), body: "{}", entries: 10, bytes: 1 << 20)
                    }
                }
                try await group.waitForAll()
            }
            #expect(try await store.messageLogUsage()["pg-app"]?.entries == 10)
            #expect(try await store.messages(.all, in: project, before: nil, limit: 100, bytes: 1 << 20).items.count == 10)
        }
    }
}
