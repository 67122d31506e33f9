import AudienceEngine
import GRDB
import Registry

extension SQLiteStore {
    public func token(_ token: String, in project: Project) async throws -> TokenInfo? {
        try await read { db in try Self.tokenInfo(db, token, in: project) }
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
            ).map { Membership(name: $0["name"], since: Clock.date($0["addedAt"])) }
        }
    }

    public func registerToken(_ token: String, in project: Project) async throws -> Committed<TokenInfo> {
        try await committing { db, log in
            let now = Clock.now()
            let row = try db.tokenRowRegistering(token, in: project, now: now, log: log)
            if row.state == .unregistered {
                try db.execute(
                    sql: "UPDATE token SET state = 'registered', updatedAt = ? WHERE id = ?", arguments: [now, row.id])
                log.record(.registered(project: project.rowID, tokens: [UInt32(row.id)]))
            }
            return try Self.tokenInfo(db, token, in: project)!
        }
    }

    public func unregisterToken(_ token: String, in project: Project) async throws -> Committed<TokenInfo?> {
        try await committing { db, log in
            guard let row = try db.tokenRow(token, in: project) else { return nil }
            try db.execute(
                sql: "UPDATE token SET state = 'unregistered', updatedAt = ? WHERE id = ?",
                arguments: [Clock.now(), row.id])
            let groupIDs = try Int64.fetchAll(
                db, sql: "SELECT groupId FROM groupMember WHERE tokenId = ?", arguments: [row.id])
            try db.execute(sql: "DELETE FROM groupMember WHERE tokenId = ?", arguments: [row.id])
            for groupID in groupIDs {
                try Self.deleteGroupIfEmpty(db, id: groupID)
            }
            let topics = try Row.fetchAll(
                db,
                sql:
                    "SELECT topic.id, topic.name FROM subscription JOIN topic ON topic.id = subscription.topicId WHERE tokenId = ?",
                arguments: [row.id])
            try db.execute(sql: "DELETE FROM subscription WHERE tokenId = ?", arguments: [row.id])
            for topic in topics {
                try Self.deleteTopicIfEmpty(db, id: topic["id"])
                log.record(.unsubscribed(project: project.rowID, topic: topic["name"], tokens: [UInt32(row.id)]))
            }
            log.record(.unregistered(project: project.rowID, tokens: [UInt32(row.id)]))
            return try Self.tokenInfo(db, token, in: project)
        }
    }

    static func tokenInfo(_ db: Database, _ token: String, in project: Project) throws -> TokenInfo? {
        try Row.fetchOne(
            db, sql: "SELECT state, createdAt, updatedAt FROM token WHERE projectId = ? AND value = ?",
            arguments: [project.rowID, token]
        ).map {
            TokenInfo(
                token: token, state: TokenState(rawValue: $0["state"]) ?? .registered,
                createdAt: Clock.date($0["createdAt"]), updatedAt: Clock.date($0["updatedAt"]))
        }
    }
}
