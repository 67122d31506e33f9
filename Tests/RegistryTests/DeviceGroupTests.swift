import Registry
import TestBackends
import Testing

@Suite("Device groups", .onEveryBackend)
struct DeviceGroupTests {
    @Test("Create drops malformed and duplicate tokens; all malformed is 'no valid registration ids'")
    func createFiltersTokens() async throws {
        let (registry, project) = try await makeRegistry()
        _ = try await registry.createGroup(
            named: "chris", tokens: [token(1), "bad token", token(1), token(2)], in: project)
        let group = try #require(try await registry.store.group(named: "chris", in: project))
        #expect(group.memberCount == 2)
        await #expect(throws: RegistryError.noValidRegistrationIds) {
            try await registry.createGroup(named: "other", tokens: ["bad token", ""], in: project)
        }
        #expect(try await registry.store.group(named: "other", in: project) == nil)
    }

    @Test("A name is unique per project")
    func uniqueNames() async throws {
        let (registry, project) = try await makeRegistry()
        _ = try await registry.createGroup(named: "chris", tokens: [token(1)], in: project)
        await #expect(throws: RegistryError.groupNameTaken) {
            try await registry.createGroup(named: "chris", tokens: [token(2)], in: project)
        }
        let (second, _) = try await registry.createProject(projectId: "second", senderId: "222")
        _ = try await registry.createGroup(named: "chris", tokens: [token(2)], in: second)
    }

    @Test("The 21st member is refused and the group is unchanged")
    func memberLimit() async throws {
        let (registry, project) = try await makeRegistry()
        let key = try await registry.createGroup(named: "g", tokens: (1...20).map(token), in: project)
        await #expect(throws: RegistryError.groupFull(limit: 20)) {
            try await registry.addToGroup(notificationKey: key, expectedName: nil, tokens: [token(21)], in: project)
        }
        #expect(try await registry.store.group(named: "g", in: project)?.memberCount == 20)
        // Adding members already in the group does not count twice.
        let group = try await registry.addToGroup(
            notificationKey: key, expectedName: "g", tokens: [token(3)], in: project)
        #expect(group.memberCount == 20)
        await #expect(throws: RegistryError.groupFull(limit: 20)) {
            try await registry.createGroup(named: "big", tokens: (1...21).map(token), in: project)
        }
        #expect(try await registry.store.group(named: "big", in: project) == nil)
    }

    @Test("Keys from GET work like the key from create; the name is checked")
    func keysFromLookUp() async throws {
        let (registry, project) = try await makeRegistry()
        let created = try await registry.createGroup(named: "g", tokens: [token(1)], in: project)
        let looked = try await registry.notificationKey(forGroupNamed: "g", in: project)
        #expect(looked != created)
        _ = try await registry.addToGroup(notificationKey: looked, expectedName: "g", tokens: [token(2)], in: project)
        _ = try await registry.addToGroup(notificationKey: created, expectedName: nil, tokens: [token(3)], in: project)
        await #expect(throws: RegistryError.groupNameMismatch) {
            try await registry.addToGroup(notificationKey: created, expectedName: "h", tokens: [token(4)], in: project)
        }
        #expect(try await registry.store.group(named: "g", in: project)?.memberCount == 3)
    }

    @Test("Removing the last member deletes the group; the name can be reused; old keys never reach the new group")
    func lastMemberDeletesGroup() async throws {
        let (registry, project) = try await makeRegistry()
        let old = try await registry.createGroup(named: "g", tokens: [token(1), token(2)], in: project)
        let group = try await registry.removeFromGroup(
            notificationKey: old, expectedName: "g", tokens: [token(1), token(2), token(9)], in: project)
        #expect(group.memberCount == 0)
        #expect(try await registry.store.group(named: "g", in: project) == nil)
        await #expect(throws: RegistryError.groupNotFound) {
            try await registry.notificationKey(forGroupNamed: "g", in: project)
        }
        let new = try await registry.createGroup(named: "g", tokens: [token(3)], in: project)
        #expect(new != old)
        await #expect(throws: RegistryError.groupNotFound) {
            try await registry.addToGroup(notificationKey: old, expectedName: nil, tokens: [token(4)], in: project)
        }
        #expect(try await registry.store.group(named: "g", in: project)?.memberCount == 1)
    }

    @Test("Keys do not resolve across projects")
    func keysStayInTheirProject() async throws {
        let (registry, project) = try await makeRegistry()
        let (second, _) = try await registry.createProject(projectId: "second", senderId: "222")
        let key = try await registry.createGroup(named: "g", tokens: [token(1)], in: project)
        _ = try await registry.createGroup(named: "g", tokens: [token(1)], in: second)
        await #expect(throws: RegistryError.undecryptableKey) {
            try await registry.addToGroup(notificationKey: key, expectedName: nil, tokens: [token(2)], in: second)
        }
    }

    @Test("Unregistered tokens are dropped by group calls")
    func unregisteredTokensAreDropped() async throws {
        let (registry, project) = try await makeRegistry()
        _ = try await registry.registerToken(token(1), in: project)
        _ = try await registry.unregisterToken(token(1), in: project)
        await #expect(throws: RegistryError.noValidRegistrationIds) {
            try await registry.createGroup(named: "g", tokens: [token(1)], in: project)
        }
        _ = try await registry.createGroup(named: "g", tokens: [token(1), token(2)], in: project)
        #expect(try await registry.store.group(named: "g", in: project)?.memberCount == 1)
    }
}
