import GRDB
import Registry

extension SQLiteStore {
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
}
