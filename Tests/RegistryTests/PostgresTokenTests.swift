import AudienceEngine
import Foundation
import Registry
import RegistryPostgres
import Testing

@Suite("PostgreSQL: tokens", .enabled(if: TestPostgres.available, TestPostgres.skipped))
struct PostgresTokenTests {
    func token(_ n: Int) -> String { "pt\(n):APA91b" + String(repeating: "k", count: 40) }

    @Test("Unregistering leaves every group and topic at once (emptied ones go); registering brings it back")
    func unregister() async throws {
        try await TestPostgres.withProject { store, project in
            _ = try await store.subscribe([token(1), token(2)], to: "a", topicLimit: 9, in: project)
            _ = try await store.subscribe([token(1)], to: "b", topicLimit: 9, in: project)
            _ = try await store.createGroup(named: "solo", tokens: [token(1)], memberLimit: 9, in: project)
            let gone = try await store.unregisterToken(token(1), in: project)
            #expect(gone.value?.state == .unregistered)
            #expect(gone.changes.map(\.change).last == .unregistered(project: project.rowID, tokens: [1]))
            #expect(try await store.topicCreationTimes(["a", "b"], in: project).keys.sorted() == ["a"])
            #expect(try await store.group(named: "solo", in: project) == nil)
            #expect(try await store.tokenIDs([token(1), token(2)], in: project) == [token(2): 2])
            #expect(try await store.subscribe([token(1)], to: "a", topicLimit: 9, in: project).value == [.notFound])
            #expect(try await store.registerToken(token(1), in: project).value.state == .registered)
            #expect(try await store.unregisterToken(token(9), in: project).value == nil)
        }
    }

    @Test("Re-keying moves topics and groups to the new token; two opposite re-keys at once queue, never deadlock")
    func rekey() async throws {
        try await TestPostgres.withProject { store, project in
            _ = try await store.subscribe([token(1)], to: "news", topicLimit: 9, in: project)
            _ = try await store.createGroup(named: "family", tokens: [token(1), token(3)], memberLimit: 9, in: project)
            let moved = try await store.rekey(token(1), to: token(2), topicLimit: 9, memberLimit: 9, in: project)
            #expect(moved.value == Rekeyed(from: token(1), to: token(2), topics: ["news"], groups: ["family"]))
            #expect(try await store.token(token(1), in: project)?.state == .unregistered)
            #expect(try await store.tokenValues(ids: try await store.memberIDs(ofGroup: nil, named: "family", in: project) ?? [], in: project)
                .sorted() == [token(2), token(3)].sorted())
            await #expect(throws: RegistryError.tokenNotFound) {
                try await store.rekey(token(1), to: token(4), topicLimit: 9, memberLimit: 9, in: project)
            }
            // Two re-keys naming the same two tokens the other way round run one after the other:
            // the second moves the device back, so one of the two ends registered.
            _ = try await store.subscribe([token(5), token(6)], to: "x", topicLimit: 9, in: project)
            let outcomes = try await withThrowingTaskGroup(of: Bool.self) { group in
                for (from, to) in [(token(5), token(6)), (token(6), token(5))] {
                    group.addTask {
                        do {
                            _ = try await store.rekey(from, to: to, topicLimit: 9, memberLimit: 9, in: project)
                            return true
                        } catch RegistryError.tokenNotFound {
                            return false
                        }
                    }
                }
                return try await group.reduce(into: []) { $0.append($1) }
            }
            #expect(outcomes == [true, true])
            let states = [try await store.token(token(5), in: project)?.state, try await store.token(token(6), in: project)?.state]
            #expect(states.filter { $0 == .registered }.count == 1)
            #expect(try await store.topicCreationTimes(["x"], in: project).count == 1)
        }
    }
}
