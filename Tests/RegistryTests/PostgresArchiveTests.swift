import AudienceEngine
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

@Suite("PostgreSQL: import", .enabled(if: TestPostgres.available, TestPostgres.skipped))
struct PostgresImportTests {
    func token(_ n: Int) -> String { "pi\(n):APA91b" + String(repeating: "i", count: 40) }

    @Test("What one database exports, another imports whole; importing it again changes nothing")
    func roundTrip() async throws {
        let exported = Records()
        try await TestPostgres.withProject { store, project in
            _ = try await store.subscribe([token(1), token(2), token(3)], to: "news", topicLimit: 9, in: project)
            _ = try await store.subscribe([token(2)], to: "alerts", topicLimit: 9, in: project)
            _ = try await store.createGroup(named: "family", tokens: [token(3), token(1)], memberLimit: 9, in: project)
            _ = try await store.unregisterToken(token(3), in: project)
            try await store.export(project: nil, ownSecret: [1, 2, 3], to: { exported.append($0) })
        }
        try await TestPostgres.withStore { store in
            _ = try await store.migrate()
            let numbered = exported.all.enumerated().map { NumberedRecord(line: $0.offset + 1, record: $0.element) }
            let first = try await store.importBatch(numbered, limits: Limits(), ownSecret: [9, 9, 9], mergingCredentials: false)
            #expect(first.value.tokens == 3)
            #expect(first.value.subscriptions == 3)
            #expect(first.value.groups == 1)
            let again = try await store.importBatch(numbered, limits: Limits(), ownSecret: [9, 9, 9], mergingCredentials: false)
            #expect(again.value == ImportTally())
            try await store.finishImport()
            let project = try #require(try await store.projects().first)
            #expect(try await store.topicSubscribers(named: "news", in: project, after: nil, limit: 10)?.1.items.map(\.name)
                == [token(1), token(2)])
            #expect(try await store.token(token(3), in: project)?.state == .unregistered)
            #expect(try await store.group(named: "family", in: project)?.memberCount == 1)
            // The first database's server key opens the project here too.
            #expect(try await store.projects().map(\.projectId) == ["pg-app"])
            let load = try await store.loadAudience()
            #expect(load.projects[project.rowID]?.topics["news"]?.count == 2)
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
