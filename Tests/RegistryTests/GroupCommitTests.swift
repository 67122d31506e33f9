import Foundation
import Logging
import Registry
import RegistrySQLite
import ServiceLifecycle
import TestBackends
import Testing

@Suite("Writes", .onEveryBackend)
struct WriteTests {
    @Test("Concurrent requests share commits, and a failing one changes nothing while the others land")
    func groupCommitIsolation() async throws {
        let (registry, project) = try await makeRegistry()
        let results = await withTaskGroup(of: Bool.self) { group in
            for n in 0..<200 {
                group.addTask {
                    // Every fifth request reuses a name and must fail without leaving its tokens behind.
                    let name = n % 5 == 0 ? "shared" : "group-\(n)"
                    do {
                        _ = try await registry.createGroup(
                            named: name, tokens: [token(n), token(1000 + n)], in: project)
                        return true
                    } catch {
                        return false
                    }
                }
            }
            return await group.reduce(into: [Bool]()) { $0.append($1) }
        }
        #expect(results.filter { $0 }.count == 161)
        let groups = try await registry.store.groups(in: project, prefix: "", after: nil, limit: 1000, incompleteOnly: false)
        #expect(groups.items.count == 161)
        // Tokens of the refused creates were never registered.
        let stored = try await (0..<200).asyncCount { n in try await registry.store.token(token(n), in: project) != nil
        }
        #expect(stored == 161)
    }

    /// In `serve` the writer commits on its own task; after shutdown begins, requests commit for
    /// themselves again.
    @Test("With the writer's own task running, and after it stops, every write lands")
    func writerService() async throws {
        let store = try TestStore.inMemory()
        let registry = try await RegistryService(store: store)
        try await registry.startAudience()
        let (project, _) = try await registry.createProject(projectId: "app", senderId: "1")
        let group = ServiceGroup(
            configuration: .init(services: store.services, logger: Logger(label: "test")))
        try await withThrowingTaskGroup(of: Void.self) { tasks in
            tasks.addTask { try await group.run() }
            let written = await withTaskGroup(of: Bool.self) { writes in
                for n in 0..<100 {
                    writes.addTask { (try? await registry.subscribe([token(n)], to: "t\(n % 3)", in: project)) != nil }
                }
                return await writes.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(written == 100)
            await group.triggerGracefulShutdown()
            try await tasks.next()
        }
        // The writer has stopped: requests commit for themselves.
        _ = try await registry.subscribe([token(500)], to: "t0", in: project)
        let subscribers = try await registry.store.topicSubscribers(named: "t0", in: project, after: nil, limit: 1000)
        #expect(subscribers?.0.subscriberCount == 35)
    }

    @Test("An acknowledged write is in the file when it is opened again")
    func acknowledgedWritesAreInTheFile() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("durable-\(UUID()).sqlite").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        do {
            let registry = try await RegistryService(store: TestStore.file(path))
            try await registry.startAudience()
            let (project, _) = try await registry.createProject(projectId: "p", senderId: "1")
            _ = try await registry.createGroup(named: "g", tokens: [token(1)], in: project)
        }
        let reopened = try await RegistryService(store: TestStore.file(path))
        try await reopened.startAudience()
        let project = try #require(try await reopened.store.projects().first)
        #expect(try await reopened.store.group(named: "g", in: project)?.memberCount == 1)
    }
}

extension Sequence where Element: Sendable {
    func asyncCount(_ predicate: (Element) async throws -> Bool) async rethrows -> Int {
        var count = 0
        for element in self where try await predicate(element) { count += 1 }
        return count
    }
}
