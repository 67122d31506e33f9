import AudienceEngine
import GRDB
import Registry

extension SQLiteStore {
    public func token(_ token: String, in project: Project) async throws -> TokenInfo? {
        try await read { db in try Self.tokenInfo(db, token, in: project.rowID) }
    }

    public func tokens(in project: Project, prefix: String, after: String?, limit: Int) async throws
        -> Page<TokenInfo>
    {
        let values = NameRange(prefix: prefix, after: after, column: "value")
        return try await read { db in
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT \(TokenInfo.sqliteColumns) FROM token
                    WHERE projectId = ? AND \(values.sql) ORDER BY value LIMIT ?
                    """, arguments: [project.rowID] + values.arguments + [limit + 1])
            let items = rows.prefix(limit).map(TokenInfo.init(sqliteRow:))
            return Page(items: Array(items), nextAfter: rows.count > limit ? items.last?.token : nil)
        }
    }

    public func groups(ofToken token: String, in project: Project) async throws -> [Membership] {
        try await read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT deviceGroup.name, groupMember.addedAt FROM groupMember
                    JOIN deviceGroup ON deviceGroup.id = groupMember.groupId
                    JOIN token ON token.id = groupMember.tokenId
                    WHERE token.projectId = ? AND token.value = ?
                    ORDER BY deviceGroup.name
                    """, arguments: [project.rowID, token]
            ).map { Membership(name: $0["name"], since: EpochMilliseconds.date($0["addedAt"])) }
        }
    }

    static func tokenInfo(_ db: Database, _ token: String, in project: Int64) throws -> TokenInfo? {
        try Row.fetchOne(
            db.cachedStatement(sql: "SELECT \(TokenInfo.sqliteColumns) FROM token WHERE projectId = ? AND value = ?"),
            arguments: [project, token]
        ).map(TokenInfo.init(sqliteRow:))
    }
}
