import Foundation
import Registry
import RegistryPostgres
import Testing

@Suite("PostgreSQL: device groups, across concurrent writers", .enabled(if: TestPostgres.available, TestPostgres.skipped))
struct PostgresGroupTests {
    func token(_ n: Int) -> String { "pg\(n):APA91b" + String(repeating: "g", count: 40) }

    @Test("Create, add, remove to the last member, which deletes the group")
    func lifecycle() async throws {
        try await TestPostgres.withProject { store, project in
            let group = try await store.createGroup(named: "family", tokens: [token(1), token(2)], memberLimit: 3, in: project).value
            #expect(group.memberCount == 2)
            await #expect(throws: RegistryError.groupNameTaken) {
                try await store.createGroup(named: "family", tokens: [token(3)], memberLimit: 3, in: project)
            }
            let grown = try await store.addMembers([token(2), token(3)], toGroup: group.id, expectedName: "family", memberLimit: 3, in: project)
            #expect(grown.value.memberCount == 3)
            await #expect(throws: RegistryError.groupFull(limit: 3)) {
                try await store.addMembers([token(4)], toGroup: group.id, expectedName: nil, memberLimit: 3, in: project)
            }
            await #expect(throws: RegistryError.groupNameMismatch) {
                try await store.addMembers([token(4)], toGroup: group.id, expectedName: "other", memberLimit: 9, in: project)
            }
            #expect(try await store.memberIDs(ofGroup: group.id, named: nil, in: project)?.count == 3)
            #expect(try await store.removeMembers([token(1), token(2)], fromGroup: group.id, expectedName: nil, in: project).memberCount == 1)
            #expect(try await store.removeMembers([token(3)], fromGroup: group.id, expectedName: nil, in: project).memberCount == 0)
            #expect(try await store.group(named: "family", in: project) == nil)
            #expect(try await store.groups(in: project, prefix: "", after: nil, limit: 10, incompleteOnly: false).items.isEmpty)
        }
    }

    @Test("Ten creates of one name at once: one group; forty adds at once to a group of 20 at most: 20 members")
    func concurrent() async throws {
        try await TestPostgres.withProject { store, project in
            let created = try await withThrowingTaskGroup(of: Bool.self) { group in
                for n in 0..<10 {
                    group.addTask {
                        do {
                            _ = try await store.createGroup(named: "same", tokens: [token(n)], memberLimit: 20, in: project)
                            return true
                        } catch RegistryError.groupNameTaken {
                            return false
                        }
                    }
                }
                return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(created == 1)
            let id = try #require(try await store.group(named: "same", in: project)).id
            let added = try await withThrowingTaskGroup(of: Bool.self) { group in
                for n in 100..<140 {
                    group.addTask {
                        do {
                            _ = try await store.addMembers([token(n)], toGroup: id, expectedName: "same", memberLimit: 20, in: project)
                            return true
                        } catch RegistryError.groupFull {
                            return false
                        }
                    }
                }
                return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(added == 19)
            #expect(try await store.group(named: "same", in: project)?.memberCount == 20)
        }
    }
}
