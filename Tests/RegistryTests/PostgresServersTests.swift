import AudienceEngine
import Foundation
import Logging
import PostgresNIO
import Registry
import RegistryPostgres
import Testing

@Suite("PostgreSQL: three servers on one database", .enabled(if: TestPostgres.available, TestPostgres.skipped))
struct PostgresServersTests {
    func token(_ n: Int) -> String { "ps\(n):APA91b" + String(repeating: "s", count: 40) }

    /// A deterministic generator, so that a failing seed can be run again.
    struct Seeded: RandomNumberGenerator {
        var state: UInt64
        mutating func next() -> UInt64 {
            state &+= 0x9E37_79B9_7F4A_7C15
            var z = state
            z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
            z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
            return z ^ (z >> 31)
        }
    }

    @Test("Random writes through three servers at once: afterwards each server's index equals a fresh load", arguments: [1, 2, 3])
    func indexesEqualTables(seed: UInt64) async throws {
        try await TestPostgres.withStores(3) { stores in
            _ = try await stores[0].migrate()
            var limits = Limits()
            limits.topicsPerToken = 4
            var servers: [RegistryService] = []
            for store in stores {
                let registry = try await RegistryService(store: store, limits: limits)
                try await registry.startAudience()
                servers.append(registry)
            }
            let (project, _) = try await servers[0].createProject(projectId: "three", senderId: "333333333333")
            try await withThrowingTaskGroup(of: Void.self) { group in
                for (index, server) in servers.enumerated() {
                    group.addTask {
                        var random = Seeded(state: seed &* 1000 &+ UInt64(index))
                        for _ in 0..<60 {
                            let tokens = (0..<Int.random(in: 1...6, using: &random)).map { _ in token(Int.random(in: 0..<30, using: &random)) }
                            let topic = "t\(Int.random(in: 0..<5, using: &random))"
                            switch Int.random(in: 0..<6, using: &random) {
                            case 0, 1: _ = try await server.subscribe(tokens, to: topic, in: project)
                            case 2: _ = try await server.unsubscribe(tokens, from: topic, in: project)
                            case 3: _ = try? await server.setTopics([topic, "t\(Int.random(in: 0..<5, using: &random))"], ofToken: tokens[0], in: project)
                            case 4: _ = try await server.unregisterToken(tokens[0], in: project)
                            default: _ = try await server.registerToken(tokens[0], in: project)
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
            let tables = try await stores[0].loadAudience().projects[project.rowID]
            for (index, server) in servers.enumerated() {
                _ = try await server.catchUp()
                let snapshot = server.audience.snapshot(of: project.rowID)
                #expect(Array(snapshot.registered.ids) == tables?.registered ?? [], "server \(index): registered")
                for topic in (0..<5).map({ "t\($0)" }) {
                    #expect(
                        snapshot.members(of: topic).ids(after: nil, limit: .max) == tables?.topics[topic] ?? [],
                        "server \(index): topic \(topic)")
                }
            }
        }
    }
}

extension TestPostgres {
    /// `count` stores (each its own pool, as separate servers have) over one schema of their own.
    static func withStores(_ count: Int, _ body: ([PostgresStore]) async throws -> Void) async throws {
        let schema = "test_\(UInt64.random(in: 0...UInt64.max))"
        var location = try PostgresLocation(parsing: try #require(url))
        let admin = try PostgresStore(location, logger: Logger(label: "test"))
        location.schema = schema
        var stores: [PostgresStore] = []
        for _ in 0..<count { stores.append(try PostgresStore(location, logger: Logger(label: "test"))) }
        var failure: (any Error)?
        do {
            _ = try await admin.database.query(PostgresQuery(unsafeSQL: "CREATE SCHEMA \(schema)"))
            try await body(stores)
        } catch {
            failure = error
        }
        _ = try? await admin.database.query(PostgresQuery(unsafeSQL: "DROP SCHEMA \(schema) CASCADE"))
        for store in stores { await store.close() }
        await admin.close()
        if let failure { throw failure }
    }
}
