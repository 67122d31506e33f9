import AudienceEngine

/// Device groups' writes: the rules, once, over any store's statements (`RegistryWriteDriver`).
/// One group per name (the store's unique index decides), at most the member limit (the group's
/// row is held before its members are counted), unknown tokens registered, unregistered ones
/// dropped, and a group deleted with its last member. Rows are held tokens first (sorted), then
/// the group.
extension RegistryWriting {
    /// Creates a group of the registered ones among `tokens` (unknown tokens are registered).
    /// Isolation: serialized per project and name (one group per name).
    public func createGroup(named name: String, tokens: [String], memberLimit: Int, in project: Project) async throws
        -> Committed<GroupRef>
    {
        try await writing { driver, log in
            let now = EpochMilliseconds.now()
            let rows = try await driver.registeringNew(tokens, in: project, at: now, log: log)
            let id = try await driver.insertGroup(name, in: project.rowID, at: now)
            let members = Self.registered(tokens, rows)
            guard !members.isEmpty else { throw RegistryError.noValidRegistrationIds }
            guard members.count <= memberLimit else { throw RegistryError.groupFull(limit: memberLimit) }
            try await driver.insertMembers(members, into: id, at: now)
            return GroupRef(id: id, name: name, memberCount: members.count)
        }
    }

    /// Isolation: serialized per group (the member limit).
    public func addMembers(
        _ tokens: [String], toGroup id: Int64, expectedName: String?, memberLimit: Int, in project: Project
    ) async throws -> Committed<GroupRef> {
        try await writing { driver, log in
            let now = EpochMilliseconds.now()
            let rows = try await driver.registeringNew(tokens, in: project, at: now, log: log)
            let name = try await driver.heldGroupName(id, expectedName: expectedName, in: project)
            let members = Self.registered(tokens, rows)
            guard !members.isEmpty else { throw RegistryError.noValidRegistrationIds }
            let current = try await driver.members(of: id)
            let joining = members.filter { !current.contains($0) }
            guard current.count + joining.count <= memberLimit else { throw RegistryError.groupFull(limit: memberLimit) }
            if !joining.isEmpty { try await driver.insertMembers(joining, into: id, at: now) }
            return GroupRef(id: id, name: name, memberCount: current.count + joining.count)
        }
    }

    /// Removes members; a group left empty is deleted (`memberCount` 0).
    /// Isolation: serialized per group (deletion on the last removal).
    public func removeMembers(_ tokens: [String], fromGroup id: Int64, expectedName: String?, in project: Project)
        async throws -> GroupRef
    {
        try await writing { driver, _ in
            let rows = try await driver.tokens(tokens, in: project.rowID)
            let name = try await driver.heldGroupName(id, expectedName: expectedName, in: project)
            let leaving = rows.values.map(\.id)
            if !leaving.isEmpty { try await driver.deleteMembers(leaving, from: id) }
            let remaining = try await driver.memberCount(of: id)
            if remaining == 0 { try await driver.deleteGroup(id) }
            return GroupRef(id: id, name: name, memberCount: remaining)
        }.value
    }
}

extension RegistryWriting {
    /// The ids of the registered tokens among `tokens`, in their order, each once.
    static func registered(_ tokens: [String], _ rows: [String: WriteTokenRow]) -> [Int64] {
        var seen: Set<Int64> = []
        return tokens.compactMap { rows[$0] }.filter { $0.state == .registered && seen.insert($0.id).inserted }
            .map(\.id)
    }
}

extension RegistryWriteDriver {
    /// The group's name, its row held, once it is known to be the project's and to match `expectedName`.
    func heldGroupName(_ id: Int64, expectedName: String?, in project: Project) async throws -> String {
        guard let name = try await groupName(id, in: project.rowID) else { throw RegistryError.groupNotFound }
        if let expectedName, expectedName != name { throw RegistryError.groupNameMismatch }
        return name
    }
}
