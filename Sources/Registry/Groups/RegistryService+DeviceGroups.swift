/// Device groups: FCM's `/fcm/notification` operations.
extension RegistryService {
    /// `create`: a new group of the usable tokens; returns a notification key for it.
    /// - Throws: `.invalidGroupName`, `.noValidRegistrationIds`, `.groupNameTaken`, `.groupFull`.
    public func createGroup(named name: String, tokens: [String], in project: Project) async throws -> String {
        let name = try groupName(name)
        let usable = usableTokens(tokens)
        guard !usable.isEmpty else { throw RegistryError.noValidRegistrationIds }
        let group = applied(
            try await store.createGroup(named: name, tokens: usable, memberLimit: limits.membersPerGroup, in: project))
        return keys.issue(groupID: group.id, in: project)
    }

    /// `add`: adds tokens to the group `notificationKey` names.
    /// - Parameter expectedName: the optional `notification_key_name`, checked against the group's name.
    public func addToGroup(notificationKey: String, expectedName: String?, tokens: [String], in project: Project)
        async throws -> GroupRef
    {
        let (id, expectedName, usable) = try await memberChange(notificationKey, expectedName, tokens, in: project)
        return applied(
            try await store.addMembers(
                usable, toGroup: id, expectedName: expectedName, memberLimit: limits.membersPerGroup, in: project))
    }

    /// `remove`: removes tokens; the group is deleted when its last member leaves.
    public func removeFromGroup(notificationKey: String, expectedName: String?, tokens: [String], in project: Project)
        async throws -> GroupRef
    {
        let (id, expectedName, usable) = try await memberChange(notificationKey, expectedName, tokens, in: project)
        return try await store.removeMembers(usable, fromGroup: id, expectedName: expectedName, in: project)
    }

    /// GET by name: a fresh notification key for the group, different on every call.
    /// - Throws: `.groupNotFound`.
    public func notificationKey(forGroupNamed name: String, in project: Project) async throws -> String {
        guard let group = try await store.group(named: try groupName(name), in: project) else {
            throw RegistryError.groupNotFound
        }
        return keys.issue(groupID: group.id, in: project)
    }

    /// What `add` and `remove` check before touching the store: the key opens a group of this
    /// project, the optional name is normalized, and at least one token is usable.
    private func memberChange(_ key: String, _ expectedName: String?, _ tokens: [String], in project: Project)
        async throws -> (id: Int64, expectedName: String?, usable: [String])
    {
        guard let id = try await groupID(forNotificationKey: key, in: project) else {
            throw RegistryError.undecryptableKey
        }
        let name = try expectedName.map(groupName)
        let usable = usableTokens(tokens)
        guard !usable.isEmpty else { throw RegistryError.noValidRegistrationIds }
        return (id, name, usable)
    }

    /// The group a notification key names: one this database sealed, else one it imported
    /// (Google's own keys, from `import-groups`; keys another registry sealed, from `import`).
    /// `nil` when it names none of this project's.
    public func groupID(forNotificationKey key: String, in project: Project) async throws -> Int64? {
        if let id = try? keys.groupID(from: key, in: project) { return id }
        guard NotificationKeyCodec.isImportable(key) else { return nil }
        return try await store.groupID(forImportedKey: key, in: project) { keyrings in
            for keyring in keyrings {
                if let group = keyring.groupID(from: key) { return (keyring.id, group) }
            }
            return nil
        }
    }

    /// The stored form of a group name (NFC), for creating and for looking up alike.
    func groupName(_ name: String) throws(RegistryError) -> String {
        try GroupName.normalized(name, maximumBytes: limits.groupNameBytes)
    }
}
