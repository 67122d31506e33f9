import Foundation
import Registry
import RegistryPostgres
import Testing

@Suite("PostgreSQL: export", .enabled(if: TestPostgres.available, TestPostgres.skipped))
struct PostgresArchiveTests {
    func token(_ n: Int) -> String { "pa\(n):APA91b" + String(repeating: "a", count: 40) }

    @Test("Project, topics, tokens with their topics, then groups with members and keyring ids, in that order")
    func export() async throws {
        try await TestPostgres.withProject { store, project in
            _ = try await store.subscribe([token(1), token(2)], to: "news", topicLimit: 9, in: project)
            _ = try await store.subscribe([token(2)], to: "alerts", topicLimit: 9, in: project)
            _ = try await store.createGroup(named: "family", tokens: [token(2), token(1)], memberLimit: 9, in: project)
            let records = Records()
            try await store.export(project: nil, ownSecret: [7, 7, 7], to: { records.append($0) })
            let kinds = records.all.map { record -> String in
                switch record {
                case .project(let p): "project \(p.projectId) keys=\(p.serverKeys.count) keyrings=\(p.keyrings.count)"
                case .topic(let t): "topic \(t.name)"
                case .token(let t): "token \(t.token.prefix(3)) \(t.topics.map(\.name))"
                case .group(let g): "group \(g.name) \(g.members.map { $0.token.prefix(3) }) ids=\(g.keyringIds.count)"
                default: "other"
                }
            }
            #expect(kinds == [
                "project pg-app keys=1 keyrings=1", "topic alerts", "topic news",
                "token pa1 [\"news\"]", "token pa2 [\"alerts\", \"news\"]", "group family [\"pa1\", \"pa2\"] ids=1",
            ])
        }
    }
}

/// Records collected from a `@Sendable` callback.
final class Records: @unchecked Sendable {
    private let lock = NSLock()
    private var records: [ArchiveRecord] = []
    func append(_ record: ArchiveRecord) { lock.withLock { records.append(record) } }
    var all: [ArchiveRecord] { lock.withLock { records } }
}
