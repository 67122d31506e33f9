import GRDB
import Registry

extension SQLiteStore {
    public func createGroup(named name: String, tokens: [String], memberLimit: Int, in project: Project) async throws
        -> Committed<GroupRef>
    {
        try await committing { db, log in
            let now = EpochMilliseconds.now()
            // The unique index on (projectId, name) is the check: no look-up before the insert.
            do {
                try db.cachedStatement(sql: "INSERT INTO deviceGroup (projectId, name, createdAt) VALUES (?, ?, ?)")
                    .execute(arguments: [project.rowID, name, now])
            } catch let error as DatabaseError where error.extendedResultCode == .SQLITE_CONSTRAINT_UNIQUE {
                throw RegistryError.groupNameTaken
            }
            let id = db.lastInsertedRowID
            let members = try tokens.map { try db.tokenRowRegistering($0, in: project, now: now, log: log) }
                .filter { $0.state == .registered }
            guard !members.isEmpty else { throw RegistryError.noValidRegistrationIds }
            guard members.count <= memberLimit else { throw RegistryError.groupFull(limit: memberLimit) }
            try Self.insertMembers(db, members.map(\.id), into: id, now: now)
            return GroupRef(id: id, name: name, memberCount: members.count)
        }
    }

    public func addMembers(
        _ tokens: [String], toGroup id: Int64, expectedName: String?, memberLimit: Int, in project: Project
    ) async throws -> Committed<GroupRef> {
        try await committing { db, log in
            let name = try Self.groupName(db, id: id, expectedName: expectedName, in: project)
            let now = EpochMilliseconds.now()
            let members = try tokens.map { try db.tokenRowRegistering($0, in: project, now: now, log: log) }
                .filter { $0.state == .registered }
            guard !members.isEmpty else { throw RegistryError.noValidRegistrationIds }
            let current = Set(
                try Int64.fetchAll(db, sql: "SELECT tokenId FROM groupMember WHERE groupId = ?", arguments: [id]))
            let joining = members.map(\.id).filter { !current.contains($0) }
            guard current.count + joining.count <= memberLimit else {
                throw RegistryError.groupFull(limit: memberLimit)
            }
            try Self.insertMembers(db, joining, into: id, now: now)
            return GroupRef(id: id, name: name, memberCount: current.count + joining.count)
        }
    }

    public func removeMembers(_ tokens: [String], fromGroup id: Int64, expectedName: String?, in project: Project)
        async throws -> GroupRef
    {
        try await write { db, log in
            let name = try Self.groupName(db, id: id, expectedName: expectedName, in: project)
            let delete = try db.cachedStatement(sql: "DELETE FROM groupMember WHERE groupId = ? AND tokenId = ?")
            for token in tokens {
                if let row = try db.tokenRow(token, in: project) {
                    try delete.execute(arguments: [id, row.id])
                }
            }
            let remaining = try Self.deleteGroupIfEmpty(db, id: id)
            return GroupRef(id: id, name: name, memberCount: remaining)
        }
    }

    public func group(named name: String, in project: Project) async throws -> GroupRef? {
        try await read { db in
            guard
                let row = try Row.fetchOne(
                    db,
                    sql: """
                        SELECT id, (SELECT COUNT(*) FROM groupMember WHERE groupId = deviceGroup.id) AS members
                        FROM deviceGroup WHERE projectId = ? AND name = ?
                        """, arguments: [project.rowID, name])
            else { return nil }
            return GroupRef(id: row["id"], name: name, memberCount: row["members"])
        }
    }

    public func groups(in project: Project, prefix: String, after: String?, limit: Int, incompleteOnly: Bool)
        async throws -> Page<GroupSummary>
    {
        let names = NameRange(prefix: prefix, after: after)
        return try await read { db in
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT name, createdAt, complete,
                      (SELECT COUNT(*) FROM groupMember WHERE groupId = deviceGroup.id) AS members
                    FROM deviceGroup WHERE projectId = ? AND \(names.sql) \(incompleteOnly ? "AND complete = 0" : "")
                    ORDER BY name LIMIT ?
                    """, arguments: [project.rowID] + names.arguments + [limit + 1])
            let items = rows.prefix(limit).map {
                GroupSummary(
                    name: $0["name"], memberCount: $0["members"], createdAt: EpochMilliseconds.date($0["createdAt"]),
                    complete: $0["complete"])
            }
            return Page(items: Array(items), nextAfter: rows.count > limit ? items.last?.name : nil)
        }
    }

    public func groupMembers(named name: String, in project: Project, after: String?, limit: Int) async throws
        -> (GroupSummary, Page<Membership>)?
    {
        try await read { db in
            let complete =
                try Bool.fetchOne(
                    db, sql: "SELECT complete FROM deviceGroup WHERE projectId = ? AND name = ?",
                    arguments: [project.rowID, name]) ?? true
            return try db.namedTokenSet(.groups, named: name, in: project, after: after, limit: limit).map { set, page in
                (GroupSummary(name: name, memberCount: set.count, createdAt: set.createdAt, complete: complete), page)
            }
        }
    }

    // MARK: - Helpers

    /// The group's name, after checking that it exists in the project and matches `expectedName`.
    static func groupName(_ db: Database, id: Int64, expectedName: String?, in project: Project) throws -> String {
        guard
            let name = try String.fetchOne(
                db, sql: "SELECT name FROM deviceGroup WHERE id = ? AND projectId = ?", arguments: [id, project.rowID])
        else { throw RegistryError.groupNotFound }
        if let expectedName, expectedName != name { throw RegistryError.groupNameMismatch }
        return name
    }

    static func insertMembers(_ db: Database, _ tokenIDs: [Int64], into groupID: Int64, now: Int64) throws {
        let insert = try db.cachedStatement(sql: "INSERT INTO groupMember (groupId, tokenId, addedAt) VALUES (?, ?, ?)")
        for tokenID in tokenIDs {
            try insert.execute(arguments: [groupID, tokenID, now])
        }
    }

    /// Deletes the group when it has no members left; returns how many it has.
    @discardableResult
    static func deleteGroupIfEmpty(_ db: Database, id: Int64) throws -> Int {
        let remaining =
            try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM groupMember WHERE groupId = ?", arguments: [id]) ?? 0
        if remaining == 0 {
            try db.execute(sql: "DELETE FROM deviceGroup WHERE id = ?", arguments: [id])
        }
        return remaining
    }
}
