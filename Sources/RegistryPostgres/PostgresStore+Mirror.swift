import PostgresNIO
import Registry

/// The mirror of Google's device groups (`project mirror`): its settings, and how complete the
/// project's groups are (the `mirror` table and `"deviceGroup".complete` of migration v3).
extension PostgresStore {
    public func mirrorSettings(of project: Project) async throws -> ChannelSettings? {
        try await database.withConnection { connection in
            try await connection.first(
                #"SELECT \#(unescaped: Self.channelSettingsColumns) FROM mirror WHERE "projectId" = \#(project.rowID)"#,
                as: (String, String, String).self
            ).map(Self.channelSettings)
        }
    }

    public func setMirrorSettings(_ settings: ChannelSettings?, for project: Project, audit: AuditWrite?)
        async throws
    {
        let now = EpochMilliseconds.now()
        try await transaction { connection in
            try await Self.insertAudit(connection, audit)
            guard let settings else {
                return try await connection.run(#"DELETE FROM mirror WHERE "projectId" = \#(project.rowID)"#)
            }
            try await connection.storeChannelSettings(settings, of: project, in: "mirror", now: now)
        }
    }

    public func isGroupComplete(_ id: Int64, in project: Project) async throws -> Bool {
        try await database.withConnection { connection in
            try await connection.first(
                #"SELECT complete FROM "deviceGroup" WHERE id = \#(id) AND "projectId" = \#(project.rowID)"#,
                as: Bool.self) ?? true
        }
    }

    public func groupCompleteness(in project: Project) async throws -> GroupCompleteness {
        try await database.withConnection { connection in
            let counts = try await connection.first(
                #"""
                SELECT COUNT(*) FILTER (WHERE complete)::bigint, COUNT(*) FILTER (WHERE NOT complete)::bigint,
                  (SELECT COUNT(*) FROM "groupMember" JOIN "deviceGroup" g ON g.id = "groupMember"."groupId"
                   WHERE g."projectId" = \#(project.rowID) AND NOT g.complete)::bigint
                FROM "deviceGroup" WHERE "projectId" = \#(project.rowID)
                """#, as: (Int64, Int64, Int64).self)
            return GroupCompleteness(
                complete: Int(counts?.0 ?? 0), incomplete: Int(counts?.1 ?? 0), membersLearned: Int(counts?.2 ?? 0))
        }
    }
}
