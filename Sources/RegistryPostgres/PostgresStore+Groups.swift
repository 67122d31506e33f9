import AudienceEngine
import Foundation
import PostgresNIO
import Registry

/// Device groups. Across servers: one group per name (the unique index decides), at most the
/// member limit (the group's row is locked before its members are counted), and a group is deleted
/// with its last member. Locks are taken tokens first (sorted), then the group.
extension PostgresStore {
    public func group(named name: String, in project: Project) async throws -> GroupRef? {
        try await database.withConnection { connection in
            try await connection.first(
                #"""
                SELECT id, (SELECT COUNT(*) FROM "groupMember" WHERE "groupId" = "deviceGroup".id)::bigint
                FROM "deviceGroup" WHERE "projectId" = \#(project.rowID) AND name = \#(name)
                """#, as: (Int64, Int64).self
            ).map { GroupRef(id: $0.0, name: name, memberCount: Int($0.1)) }
        }
    }

    public func groups(in project: Project, prefix: String, after: String?, limit: Int, incompleteOnly: Bool)
        async throws -> Page<GroupSummary>
    {
        try await database.withConnection { connection in
            let (lower, start) =
                after.map { $0.utf8.lexicographicallyPrecedes(prefix.utf8) } == false
                ? (">", after ?? "") : (">=", prefix)
            let end = prefix.isEmpty ? nil : prefix + "\u{10FFFF}"
            var items: [GroupSummary] = []
            for try await (name, createdAt, members, complete) in try await connection.query(
                #"""
                SELECT name, "createdAt", (SELECT COUNT(*) FROM "groupMember" WHERE "groupId" = "deviceGroup".id)::bigint,
                  complete
                FROM "deviceGroup"
                WHERE "projectId" = \#(project.rowID) AND name \#(unescaped: lower) \#(start)
                  AND name < COALESCE(\#(end)::text, name || 'x') AND (NOT \#(incompleteOnly) OR NOT complete)
                ORDER BY name LIMIT \#(limit + 1)
                """#, logger: .silent
            ).decode((String, Int64, Int64, Bool).self) {
                items.append(
                    GroupSummary(
                        name: name, memberCount: Int(members), createdAt: EpochMilliseconds.date(createdAt),
                        complete: complete))
            }
            let page = Array(items.prefix(limit))
            return Page(items: page, nextAfter: items.count > limit ? page.last?.name : nil)
        }
    }

    public func groupMembers(named name: String, in project: Project, after: String?, limit: Int) async throws
        -> (GroupSummary, Page<Membership>)?
    {
        try await database.withConnection { connection in
            guard
                let (id, createdAt, count, complete) = try await connection.first(
                    #"""
                    SELECT id, "createdAt", (SELECT COUNT(*) FROM "groupMember" WHERE "groupId" = "deviceGroup".id)::bigint,
                      complete
                    FROM "deviceGroup" WHERE "projectId" = \#(project.rowID) AND name = \#(name)
                    """#, as: (Int64, Int64, Int64, Bool).self)
            else { return nil }
            var members: [(Int32, Membership)] = []
            for try await (tokenID, value, since) in try await connection.query(
                #"""
                SELECT token.id, token.value, "groupMember"."addedAt" FROM "groupMember"
                JOIN token ON token.id = "groupMember"."tokenId"
                WHERE "groupMember"."groupId" = \#(id) AND "groupMember"."tokenId" > \#(Int32(after ?? "") ?? 0)
                ORDER BY "groupMember"."tokenId" LIMIT \#(limit + 1)
                """#, logger: .silent
            ).decode((Int32, String, Int64).self) {
                members.append((tokenID, Membership(name: value, since: EpochMilliseconds.date(since))))
            }
            let page = Array(members.prefix(limit))
            return (
                GroupSummary(
                    name: name, memberCount: Int(count), createdAt: EpochMilliseconds.date(createdAt), complete: complete),
                Page(items: page.map(\.1), nextAfter: members.count > limit ? page.last.map { String($0.0) } : nil)
            )
        }
    }

    public func memberIDs(ofGroup id: Int64?, named name: String?, in project: Project) async throws -> [UInt32]? {
        try await database.withConnection { connection in
            let groupID =
                if let id {
                    try await connection.first(
                        #"SELECT id FROM "deviceGroup" WHERE id = \#(id) AND "projectId" = \#(project.rowID)"#,
                        as: Int64.self)
                } else {
                    try await connection.first(
                        #"SELECT id FROM "deviceGroup" WHERE name = \#(name ?? "") AND "projectId" = \#(project.rowID)"#,
                        as: Int64.self)
                }
            guard let groupID else { return nil }
            var ids: [UInt32] = []
            for try await tokenID in try await connection.query(
                #"SELECT "tokenId" FROM "groupMember" WHERE "groupId" = \#(groupID) ORDER BY "tokenId""#, logger: .silent
            ).decode(Int32.self) { ids.append(UInt32(tokenID)) }
            return ids
        }
    }
}

extension PostgresConnection {
    func insertMembers(_ tokenIDs: [Int32], into groupID: Int64, now: Int64) async throws {
        guard !tokenIDs.isEmpty else { return }
        try await run(
            #"""
            INSERT INTO "groupMember" ("groupId", "tokenId", "addedAt")
            SELECT \#(groupID), id, \#(now) FROM unnest(\#(tokenIDs)::integer[]) AS id
            """#)
    }
}
