@testable import AudienceEngine
import Foundation
import GRDB
import Registry
@testable import RegistrySQLite
import Testing

/// Several processes on one database file: each `RegistryService` here stands for a server with
/// its own connections and its own index, as two `serve` processes would have.
@Suite("Change feed")
struct ChangeFeedTests {
    /// A temporary database file, removed when the test ends.
    final class TemporaryFile {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("feed-\(UUID()).sqlite").path

        deinit {
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        }

        func open(retention: Int = 100_000) async throws -> RegistryService {
            let registry = try await RegistryService(
                store: TestStore.file(path, feedRetention: retention))
            try await registry.startAudience()
            return registry
        }
    }

    /// Each project's topics and registered tokens, for comparing two indexes.
    static func contents(of registry: RegistryService, projects: [Project]) -> [[String: RoaringBitmap]] {
        projects.flatMap { project in
            let snapshot = registry.audience.snapshot(of: project.rowID)
            return [snapshot.topics.mapValues(\.bitmap), ["(registered)": snapshot.registered]]
        }
    }

    @Test("Random writes through two registries on one file: after catching up, each index equals a fresh load")
    func twoWritersAgree() async throws {
        for seed in UInt64(1)...6 {
            let file = TemporaryFile()
            let first = try await file.open()
            let second = try await file.open()
            let (project, _) = try await first.createProject(projectId: "app", senderId: "111")
            let (other, _) = try await second.createProject(projectId: "other", senderId: "222")
            var random = SplitMix64(seed: seed)
            let topics = ["a", "b", "c", "d"]
            for _ in 0..<120 {
                let registry = random.next() % 2 == 0 ? first : second
                let target = random.next() % 4 == 0 ? other : project
                let some = (0..<Int(random.next() % 6 + 1)).map { _ in token(Int(random.next() % 30)) }
                let topic = topics[Int(random.next() % 4)]
                do {
                    switch random.next() % 6 {
                    case 0, 1: _ = try await registry.subscribe(some, to: topic, in: target)
                    case 2: _ = try await registry.unsubscribe(some, from: topic, in: target)
                    case 3: _ = try await registry.unregisterToken(some[0], in: target)
                    case 4: _ = try await registry.registerToken(some[0], in: target)
                    default: _ = try await registry.setTopics([topic], ofToken: some[0], in: target)
                    }
                } catch is RegistryError {
                    // An unregistered token refuses setTopics: a rule, not a failure of the feed.
                }
                // Sometimes the other process follows mid-way, as its follower would.
                if random.next() % 5 == 0 { try await (registry.audience === first.audience ? second : first).catchUp() }
            }
            try await first.catchUp()
            try await second.catchUp()
            let fresh = try await file.open()
            let expected = Self.contents(of: fresh, projects: [project, other])
            #expect(Self.contents(of: first, projects: [project, other]) == expected, "seed \(seed)")
            #expect(Self.contents(of: second, projects: [project, other]) == expected, "seed \(seed)")
            #expect(first.audience.position == second.audience.position)
        }
    }

    @Test("A write is in the writer's own index at once, and in another's after it catches up")
    func readYourWrites() async throws {
        let file = TemporaryFile()
        let writer = try await file.open()
        let reader = try await file.open()
        let (project, _) = try await writer.createProject(projectId: "app", senderId: "111")
        _ = try await writer.subscribe([token(1), token(2)], to: "news", in: project)
        #expect(writer.audience.snapshot(of: project.rowID).members(of: "news").count == 2)
        #expect(reader.audience.snapshot(of: project.rowID).members(of: "news").count == 0)
        // The tokens registered, seen by this registration call, and subscribed.
        #expect(try await reader.catchUp() == 3)
        #expect(reader.audience.snapshot(of: project.rowID).members(of: "news").count == 2)
        // The reader's own write is in its index at once; what it missed comes with its follower,
        // in the feed's order.
        _ = try await writer.unsubscribe([token(1)], from: "news", in: project)
        _ = try await reader.subscribe([token(3)], to: "news", in: project)
        #expect(reader.audience.snapshot(of: project.rowID).members(of: "news").bitmap.contains(3))
        try await reader.catchUp()
        #expect(reader.audience.snapshot(of: project.rowID).members(of: "news").bitmap == RoaringBitmap([2, 3]))
    }

    @Test("A follower that fell behind the feed's retention reloads, and ends equal to the tables")
    func truncatedFeedReloads() async throws {
        let file = TemporaryFile()
        let writer = try await file.open(retention: 1000)
        let reader = try await file.open(retention: 1000)
        let (project, _) = try await writer.createProject(projectId: "app", senderId: "111")
        for n in 0..<30 { _ = try await writer.subscribe([token(n)], to: "t\(n % 3)", in: project) }
        let store = try #require(writer.store as? SQLiteStore)
        try await store.database.writer.write { db in try ChangeFeedSQL.prune(db, keeping: 5) }
        #expect(try await reader.catchUp() == nil)
        #expect(Self.contents(of: reader, projects: [project]) == Self.contents(of: writer, projects: [project]))
        let remaining = try await store.database.writer.read { db in
            try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM audienceChange")
        }
        #expect(remaining == 5)
    }

    @Test("A reset entry (a bulk writer) makes every follower reload")
    func resetReloads() async throws {
        let file = TemporaryFile()
        let follower = try await file.open()
        let store = try TestStore.file(file.path)
        let generated = try await SyntheticRegistry(tokens: 50, topics: 3, subscriptions: 60, seed: 7)
            .generate(into: store)
        #expect(follower.audience.snapshot(of: generated.0.rowID).registered.isEmpty)
        #expect(try await follower.catchUp() == nil)
        #expect(follower.audience.snapshot(of: generated.0.rowID).registered.count == 50)
    }

    @Test("A request rolled back leaves no feed entry")
    func rollbackLeavesNoEntry() async throws {
        let file = TemporaryFile()
        let registry = try await file.open()
        let (project, _) = try await registry.createProject(projectId: "app", senderId: "111")
        let before = registry.audience.position
        await #expect(throws: RegistryError.self) {
            // Fails after registering its tokens: the group name is taken.
            _ = try await registry.createGroup(named: "g", tokens: [token(1)], in: project)
            _ = try await registry.createGroup(named: "g", tokens: [token(2)], in: project)
        }
        #expect(registry.audience.snapshot(of: project.rowID).registered == RoaringBitmap([1]))
        // Applied in its place (nothing else committed before it): the cursor is past it already
        // (the token registered, and seen by this registration call).
        #expect(registry.audience.position == before + 2)
        #expect(try await registry.catchUp() == 0)
        #expect(registry.audience.snapshot(of: project.rowID).registered == RoaringBitmap([1]))
    }
}
