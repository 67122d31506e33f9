import AudienceEngine
import GRDB
import Registry

extension SQLiteStore {
    public func token(_ token: String, in project: Project) async throws -> TokenInfo? {
        try await read { db in try Self.tokenInfo(db, token, in: project) }
    }

    public func tokens(in project: Project, prefix: String, after: String?, limit: Int) async throws
        -> Page<TokenInfo>
    {
        let values = NameRange(prefix: prefix, after: after, column: "value")
        return try await read { db in
            let rows = try Row.fetchAll(
                db,
                sql: """
                    SELECT value, state, createdAt, updatedAt FROM token
                    WHERE projectId = ? AND \(values.sql) ORDER BY value LIMIT ?
                    """, arguments: [project.rowID] + values.arguments + [limit + 1])
            let items = rows.prefix(limit).map {
                TokenInfo(
                    token: $0["value"], state: TokenState(rawValue: $0["state"]) ?? .registered,
                    createdAt: EpochMilliseconds.date($0["createdAt"]),
                    updatedAt: EpochMilliseconds.date($0["updatedAt"]))
            }
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

    public func rekey(_ from: String, to: String, topicLimit: Int, memberLimit: Int, in project: Project) async throws
        -> Committed<Rekeyed>
    {
        try await committing { db, log in
            let now = EpochMilliseconds.now()
            guard let source = try db.tokenRow(from, in: project), source.state == .registered else {
                throw RegistryError.tokenNotFound
            }
            let target = try db.tokenRowRegistering(to, in: project, now: now, log: log)
            if target.state == .unregistered {
                try db.execute(
                    sql: "UPDATE token SET state = 'registered', updatedAt = ? WHERE id = ?", arguments: [now, target.id])
                log.record(.registered(project: project.rowID, tokens: [UInt32(target.id)]))
            }
            let (sourceID, targetID) = (UInt32(source.id), UInt32(target.id))
            // Topics: the source's become the target's too, then the source leaves them.
            let topics = try Row.fetchAll(
                db,
                sql: """
                    SELECT topic.id, topic.name FROM subscription JOIN topic ON topic.id = subscription.topicId
                    WHERE subscription.tokenId = ?
                    """, arguments: [source.id])
            for topic in topics {
                try db.execute(
                    sql: "INSERT INTO subscription (topicId, tokenId, createdAt) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                    arguments: [topic["id"] as Int64, target.id, now])
                if db.changesCount > 0 {
                    log.record(.subscribed(project: project.rowID, topic: topic["name"], tokens: [targetID]))
                }
                log.record(.unsubscribed(project: project.rowID, topic: topic["name"], tokens: [sourceID]))
            }
            try db.execute(sql: "DELETE FROM subscription WHERE tokenId = ?", arguments: [source.id])
            let topicCount =
                try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM subscription WHERE tokenId = ?", arguments: [target.id])
                ?? 0
            guard topicCount <= topicLimit else { throw RegistryError.tooManyTopics(limit: topicLimit) }
            // Groups: the target takes the source's place in each.
            let groupIDs = try Int64.fetchAll(
                db, sql: "SELECT groupId FROM groupMember WHERE tokenId = ?", arguments: [source.id])
            try db.execute(sql: "DELETE FROM groupMember WHERE tokenId = ?", arguments: [source.id])
            for groupID in groupIDs {
                try db.execute(
                    sql: "INSERT INTO groupMember (groupId, tokenId, addedAt) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
                    arguments: [groupID, target.id, now])
                guard try Self.deleteGroupIfEmpty(db, id: groupID) <= memberLimit else {
                    throw RegistryError.groupFull(limit: memberLimit)
                }
            }
            try db.execute(
                sql: "UPDATE token SET state = 'unregistered', updatedAt = ? WHERE id = ?", arguments: [now, source.id])
            log.record(.unregistered(project: project.rowID, tokens: [sourceID]))
            let topicNames = try String.fetchAll(
                db,
                sql: """
                    SELECT topic.name FROM subscription JOIN topic ON topic.id = subscription.topicId
                    WHERE subscription.tokenId = ? ORDER BY topic.name
                    """, arguments: [target.id])
            let groupNames = try String.fetchAll(
                db,
                sql: """
                    SELECT deviceGroup.name FROM groupMember JOIN deviceGroup ON deviceGroup.id = groupMember.groupId
                    WHERE groupMember.tokenId = ? ORDER BY deviceGroup.name
                    """, arguments: [target.id])
            return Rekeyed(from: from, to: to, topics: topicNames, groups: groupNames)
        }
    }

    static func tokenInfo(_ db: Database, _ token: String, in project: Project) throws -> TokenInfo? {
        try Row.fetchOne(
            db, sql: "SELECT state, createdAt, updatedAt FROM token WHERE projectId = ? AND value = ?",
            arguments: [project.rowID, token]
        ).map {
            TokenInfo(
                token: token, state: TokenState(rawValue: $0["state"]) ?? .registered,
                createdAt: EpochMilliseconds.date($0["createdAt"]), updatedAt: EpochMilliseconds.date($0["updatedAt"]))
        }
    }
}
