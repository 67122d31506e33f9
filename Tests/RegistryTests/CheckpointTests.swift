@testable import AudienceEngine
import Foundation
import GRDB
@testable import Registry
@testable import RegistrySQLite
import Testing

@Suite("Audience checkpoints")
struct CheckpointTests {
    /// A database file and its checkpoint beside it, removed when the test ends.
    final class Files {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("checkpoint-\(UUID()).sqlite").path
        var checkpoint: String { path + ".audience" }

        deinit {
            for suffix in ["", "-wal", "-shm", ".audience", ".audience.tmp"] {
                try? FileManager.default.removeItem(atPath: path + suffix)
            }
        }

        /// The registry on the file, its audience index started.
        func open(checkpoint: Bool = true) async throws -> RegistryService {
            try await start(checkpoint: checkpoint).registry
        }

        /// The registry on the file, and how its audience index started.
        func start(checkpoint: Bool = true) async throws -> (registry: RegistryService, startup: AudienceStartup) {
            let registry = try await RegistryService(
                store: TestStore.file(path), checkpoint: checkpoint ? self.checkpoint : nil)
            return (registry, try await registry.startAudience())
        }
    }

    static func fill(_ registry: RegistryService, _ project: Project, from: Int, to: Int) async throws {
        for n in from..<to {
            _ = try await registry.subscribe([token(n)], to: "t\(n % 4)", in: project)
            if n % 7 == 0 { _ = try await registry.unregisterToken(token(n), in: project) }
        }
    }

    static func contents(_ registry: RegistryService, _ project: Project) -> [String: RoaringBitmap] {
        let snapshot = registry.audience.snapshot(of: project.rowID)
        return snapshot.topics.mapValues(\.bitmap).merging(["(registered)": snapshot.registered]) { $1 }
    }

    @Test("A restart loads the checkpoint, replays what was written after it, and equals the tables")
    func restartFromCheckpoint() async throws {
        let files = Files()
        let first = try await files.open()
        let (project, _) = try await first.createProject(projectId: "app", senderId: "1")
        try await Self.fill(first, project, from: 0, to: 40)
        // As the feed follower of a running server does before each save.
        try await first.catchUp()
        let saved = try #require(try await first.saveCheckpoint())
        #expect(saved.position > 0)
        #expect(saved.position == first.audience.position)
        // Written after the checkpoint: the next start must replay it.
        try await Self.fill(first, project, from: 40, to: 60)

        let (restarted, restartedStart) = try await files.start()
        guard case .checkpoint(let position, let replayed) = restartedStart.source else {
            Issue.record("expected a start from the checkpoint, got \(String(describing: restartedStart.source))")
            return
        }
        #expect(position == saved.position)
        #expect(replayed > 0)
        let fromTables = try await files.open(checkpoint: false)
        #expect(Self.contents(restarted, project) == Self.contents(fromTables, project))
        #expect(restarted.audience.position == fromTables.audience.position)
    }

    @Test("A missing, damaged, older, foreign or stale checkpoint falls back to the tables and says why")
    func fallbacks() async throws {
        let files = Files()
        let (registry, registryStart) = try await files.start()
        guard case .tables(let missing?) = registryStart.source else { Issue.record("expected tables"); return }
        #expect(missing.contains("no checkpoint file"))
        let (project, _) = try await registry.createProject(projectId: "app", senderId: "1")
        try await Self.fill(registry, project, from: 0, to: 20)
        try await registry.saveCheckpoint()

        // Damaged: one byte flipped in the middle.
        var bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: files.checkpoint)))
        let original = bytes
        bytes[bytes.count / 2] ^= 0xFF
        try Data(bytes).write(to: URL(fileURLWithPath: files.checkpoint))
        let (damaged, damagedStart) = try await files.start()
        guard case .tables(let reason?) = damagedStart.source else { Issue.record("expected tables"); return }
        #expect(reason.contains("damaged"))
        #expect(Self.contents(damaged, project) == Self.contents(registry, project))

        // One written by an earlier version, in its format.
        try Data(Array("FCMRAUD1".utf8) + original.dropFirst(8)).write(to: URL(fileURLWithPath: files.checkpoint))
        let (older, olderStart) = try await files.start()
        guard case .tables(let olderWhy?) = olderStart.source else { Issue.record("expected tables"); return }
        #expect(olderWhy.contains("older format"))
        #expect(Self.contents(older, project) == Self.contents(registry, project))

        // Another database's checkpoint.
        let other = Files()
        let foreign = try await other.open()
        _ = try await foreign.createProject(projectId: "app", senderId: "1")
        try Data(original).write(to: URL(fileURLWithPath: other.checkpoint))
        let (_, reopenedStart) = try await other.start()
        guard case .tables(let why?) = reopenedStart.source else { Issue.record("expected tables"); return }
        #expect(why.contains("another database"))

        // Stale: the feed was pruned past the checkpoint's position.
        try Data(original).write(to: URL(fileURLWithPath: files.checkpoint))
        try await Self.fill(registry, project, from: 20, to: 30)
        let store = try #require(registry.store as? SQLiteStore)
        try await store.database.writer.write { db in try ChangeFeedSQL.prune(db, keeping: 1) }
        let (stale, staleStart) = try await files.start()
        guard case .tables(let staleWhy?) = staleStart.source else { Issue.record("expected tables"); return }
        #expect(staleWhy.contains("older than the feed keeps"))
        #expect(Self.contents(stale, project) == Self.contents(registry, project))
    }

    @Test("Truncated checkpoint bytes are refused at every length")
    func truncation() async throws {
        let files = Files()
        let registry = try await files.open()
        let (project, _) = try await registry.createProject(projectId: "app", senderId: "1")
        try await Self.fill(registry, project, from: 0, to: 10)
        let bytes = AudienceCheckpoint.encode(
            .init(state: registry.audience.copyState(), fingerprint: []), databaseID: registry.databaseID)
        #expect(throws: Never.self) { try AudienceCheckpoint.decode(bytes, databaseID: registry.databaseID) }
        for length in stride(from: 0, to: bytes.count, by: 3) {
            #expect(throws: AudienceCheckpoint.Problem.self) {
                try AudienceCheckpoint.decode(Array(bytes.prefix(length)), databaseID: registry.databaseID)
            }
        }
    }

    /// The documented backup is `VACUUM INTO` while the server runs; restoring it puts an older
    /// database under a checkpoint saved later.
    @Test(
        "A checkpoint ahead of its database (a backup restored), or of another copy of it, is refused; later writes reach the index"
    )
    func restoredBackup() async throws {
        let files = Files()
        let backup = files.path + ".backup"
        defer { try? FileManager.default.removeItem(atPath: backup) }
        do {
            let registry = try await files.open()
            let (project, _) = try await registry.createProject(projectId: "app", senderId: "1")
            try await Self.fill(registry, project, from: 0, to: 20)
            let store = try #require(registry.store as? SQLiteStore)
            try await store.database.writer.writeWithoutTransaction { db in
                try db.execute(sql: "VACUUM INTO ?", arguments: [backup])
            }
            _ = try await registry.unsubscribe([token(1), token(5)], from: "t1", in: project)
            try await Self.fill(registry, project, from: 20, to: 40)
            try await registry.catchUp()
            try await registry.saveCheckpoint()
        }
        // The restore: the backup over the database, the checkpoint left as it was.
        for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: files.path + suffix) }
        try FileManager.default.copyItem(atPath: backup, toPath: files.path)
        let (restored, start) = try await files.start()
        guard case .tables(let why?) = start.source else { Issue.record("expected tables, got \(start.source)"); return }
        #expect(why.contains("ahead of the database"))
        let project = try #require(try await restored.projects().first)
        let fromTables = try await files.open(checkpoint: false)
        #expect(Self.contents(restored, project) == Self.contents(fromTables, project))

        // Written to past the checkpoint's position, the restored copy is another database's history.
        try await Self.fill(restored, project, from: 100, to: 200)
        let (later, laterStart) = try await files.start()
        guard case .tables(let otherWhy?) = laterStart.source else { Issue.record("expected tables"); return }
        #expect(otherWhy.contains("another copy"))
        #expect(Self.contents(later, project) == Self.contents(try await files.open(checkpoint: false), project))
    }

    @Test("Two processes saving one checkpoint at once never leave a damaged file")
    func concurrentSaves() async throws {
        let files = Files()
        let first = try await files.open()
        let second = try await files.open()
        let (project, _) = try await first.createProject(projectId: "app", senderId: "1")
        try await Self.fill(first, project, from: 0, to: 50)
        try await first.catchUp()
        try await second.catchUp()
        try await withThrowingTaskGroup(of: Void.self) { group in
            for registry in [first, second] {
                group.addTask { for _ in 0..<20 { try await registry.saveCheckpoint() } }
            }
            try await group.waitForAll()
        }
        let (restarted, start) = try await files.start()
        guard case .checkpoint = start.source else { Issue.record("expected the checkpoint, got \(start.source)"); return }
        #expect(Self.contents(restarted, project) == Self.contents(first, project))
        let leftovers = try FileManager.default.contentsOfDirectory(atPath: FileManager.default.temporaryDirectory.path)
            .filter { $0.hasPrefix((files.checkpoint as NSString).lastPathComponent + ".tmp") }
        #expect(leftovers.isEmpty)
    }
}
