import Foundation

/// Device groups, with the keys other registries sealed for them and the keys Google issued.
extension ArchiveMerge {
    func take(_ record: GroupArchive) async throws {
        let project = try await projectRowID(record.project)
        let groupID: Int64
        if let id = try await driver.group(record.name, in: project) {
            groupID = id
            // What was missing is still missing: a group merged with an incomplete one is incomplete.
            if !record.complete { try await driver.markIncomplete(id) }
        } else {
            groupID = try await driver.insertGroup(
                record.name, createdAt: EpochMilliseconds.milliseconds(record.createdAt), complete: record.complete,
                in: project)
            tally.groups += 1
        }
        // A member new here is registered since it joined.
        let tokens = try await merged(
            record.members.map {
                let since = EpochMilliseconds.milliseconds($0.since)
                return NewToken(
                    value: $0.token, state: .registered, createdAt: since, updatedAt: since, lastSeenAt: since)
            }, in: project)
        // As the API does: a token reported dead does not join a group.
        let joining = record.members.compactMap { member -> (token: Int64, since: Int64)? in
            guard let row = tokens[member.token], row.registered else { return nil }
            return (row.id, EpochMilliseconds.milliseconds(member.since))
        }
        if !joining.isEmpty { tally.members += try await driver.addMembers(joining, to: groupID) }
        let count = try await driver.memberCount(of: groupID)
        guard count <= limits.membersPerGroup else {
            throw ArchiveProblem("group \(record.name) would have more than \(limits.membersPerGroup) members here")
        }
        guard count > 0 else {
            // Every member was reported dead here since: as with its last removal, no group.
            try await driver.deleteGroup(groupID)
            tally.groups -= 1
            return
        }
        for id in record.keyringIds {
            guard let keyring = try await keyringRowID(id.keyring, in: project, projectId: record.project) else {
                continue
            }
            try await driver.mapKeyring(keyring, sourceGroup: id.group, to: groupID)
        }
        for key in record.notificationKeys { try await keep(key, naming: groupID, in: project) }
    }

    /// Keeps a notification key issued elsewhere as a name of the group; a key that names
    /// another group here is refused.
    private func keep(_ key: String, naming groupID: Int64, in project: Int64) async throws {
        if try await driver.keepImportedKey(key, naming: groupID, in: project, at: EpochMilliseconds.now()) {
            tally.notificationKeys += 1
            return
        }
        if let (namedID, name) = try await driver.groupNamed(byImportedKey: key, in: project), namedID != groupID {
            throw ArchiveProblem("notification key \(key.prefix(16))… already names group \(name)")
        }
    }
}
