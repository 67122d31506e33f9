import GRDB
import Registry

/// The mirror of Google's device groups (`project mirror`): its settings, and how complete the
/// project's groups are (the `mirror` table and `deviceGroup.complete` of migration v9).
extension SQLiteStore {
    public func mirrorSettings(of project: Project) async throws -> ChannelSettings? {
        try await read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM mirror WHERE projectId = ?", arguments: [project.rowID])
                .map(Self.channelSettings)
        }
    }

    public func setMirrorSettings(_ settings: ChannelSettings?, for project: Project, audit: AuditWrite?)
        async throws
    {
        try await write { db, _ in
            try Self.insertAudit(db, audit)
            guard let settings else {
                try db.execute(sql: "DELETE FROM mirror WHERE projectId = ?", arguments: [project.rowID])
                return
            }
            try Self.storeChannelSettings(settings, of: project, in: "mirror", db)
        }
    }

    public func isGroupComplete(_ id: Int64, in project: Project) async throws -> Bool {
        try await read { db in
            try Bool.fetchOne(
                db, sql: "SELECT complete FROM deviceGroup WHERE id = ? AND projectId = ?", arguments: [id, project.rowID])
                ?? true
        }
    }

    public func groupCompleteness(in project: Project) async throws -> GroupCompleteness {
        try await read { db in
            let row = try Row.fetchOne(
                db,
                sql: """
                    SELECT COALESCE(SUM(complete = 1), 0) AS complete, COALESCE(SUM(complete = 0), 0) AS incomplete,
                      (SELECT COUNT(*) FROM groupMember JOIN deviceGroup g ON g.id = groupMember.groupId
                       WHERE g.projectId = ? AND g.complete = 0) AS learned
                    FROM deviceGroup WHERE projectId = ?
                    """, arguments: [project.rowID, project.rowID])
            return GroupCompleteness(
                complete: row?["complete"] ?? 0, incomplete: row?["incomplete"] ?? 0, membersLearned: row?["learned"] ?? 0)
        }
    }
}
