import Registry
import RegistryPostgres
import RegistrySQLite
import TestBackends
import Testing

@Suite("Synthetic registry", .onEveryBackend)
struct SyntheticRegistryTests {
    @Test("Topic sizes are skewed: the largest holds 20% of the tokens, and they add up to the subscriptions asked for")
    func sizes() {
        let generator = SyntheticRegistry(tokens: 1_000_000, topics: 10_000, subscriptions: 5_000_000, seed: 1)
        let sizes = generator.topicSizes()
        #expect(sizes.count == 10_000)
        #expect(sizes[0] == 200_000)
        #expect(sizes == sizes.sorted(by: >))
        let total = sizes.reduce(0, +)
        #expect(abs(total - 5_000_000) < 50_000)
    }

    @Test("The same seed builds the same registry, on either backend")
    func reproducible() async throws {
        func build(seed: UInt64, on backend: TestBackend = TestBackend.current) async throws -> ([String], [Int]) {
            let store = try await TestBackend.$current.withValue(backend) { try await TestBackend.makeStore() }
            let generator = SyntheticRegistry(tokens: 300, topics: 12, subscriptions: 900, seed: seed)
            let project: Project
            if let sqlite = store as? SQLiteStore {
                (project, _) = try await generator.generate(into: sqlite)
            } else {
                (project, _) = try await generator.generate(into: try #require(store as? PostgresStore))
            }
            let registry = try await RegistryService(store: store)
            try await registry.startAudience()
            var counts: [Int] = []
            for topic in 1...12 {
                counts.append(
                    try await registry.resolve(
                        .topic("topic-\(topic)"), in: project, after: nil, pageSize: nil, countOnly: true
                    ).count)
            }
            let tokens =
                try await registry.resolve(.topic("topic-1"), in: project, after: nil, pageSize: 1000, countOnly: false)
                .tokens ?? []
            return (tokens, counts)
        }
        let first = try await build(seed: 42)
        let second = try await build(seed: 42)
        let other = try await build(seed: 43)
        #expect(first.0 == second.0)
        #expect(first.1 == second.1)
        #expect(first.0 != other.0)
        #expect(first.1[0] == 60)
        #expect(first.0.allSatisfy { RegistrationToken.isWellFormed($0) && $0.count == 163 })
        if TestBackend.current == .postgres {
            // PostgreSQL's registry is SQLite's for the same seed.
            let onSQLite = try await build(seed: 42, on: .sqlite)
            #expect(first.0 == onSQLite.0)
            #expect(first.1 == onSQLite.1)
        }
    }
}
