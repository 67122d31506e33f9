import AudienceEngine
import Foundation
import PostgresNIO
import Registry

/// The statements of the registry's token, topic and group writes on PostgreSQL
/// (`RegistryWriteDriver`), inside one transaction. Rows read to be written are locked until it
/// ends, in the order every write takes them: token rows (sorted), topic rows (by name), group rows
/// (by id); statements over many tokens take arrays, one round trip each.
public struct PostgresWriteDriver: RegistryWriteDriver {
    let connection: PostgresConnection

    public func memberCount(of group: Int64) async throws -> Int { try await connection.memberCount(of: group) }
    public func deleteGroup(_ group: Int64) async throws { try await connection.deleteGroup(group) }

    // MARK: - Tokens

    public func token(_ value: String, in project: Int64) async throws -> WriteTokenRow? {
        try await connection.lockedToken(value, in: project).map(\.writeRow)
    }

    public func tokens(_ values: [String], in project: Int64) async throws -> [String: WriteTokenRow] {
        try await connection.lockedTokens(values, in: project).mapValues(\.writeRow)
    }

    public func tokenRegistering(_ value: String, in project: Int64, at now: Int64) async throws -> WriteTokenRow {
        try await connection.lockedTokenRegistering(value, in: project, now: now).writeRow
    }

    public func tokensRegistering(_ values: [String], in project: Int64, at now: Int64) async throws
        -> [String: WriteTokenRow]
    {
        try await connection.lockedTokensRegistering(values, in: project, now: now).mapValues(\.writeRow)
    }

    public func setState(_ state: TokenState, ofToken token: Int64, at now: Int64) async throws {
        try await connection.run(
            #"UPDATE token SET state = \#(state.rawValue), "updatedAt" = \#(now) WHERE id = \#(Int32(token))"#)
    }

    public func updateAttributes(_ changes: [(token: Int64, change: TokenAttributeChange, seenAt: Int64)])
        async throws
    {
        // One round trip for every change: each field's flag says whether it changes, its value
        // what to; an empty value (never a valid one) clears it. The rules give each token once.
        guard !changes.isEmpty else { return }
        func column<Value>(
            _ field: KeyPath<TokenAttributeChange, TokenAttributeChange.Field<Value>>, _ text: (Value) -> String
        ) -> (changes: [Bool], values: [String]) {
            (
                changes.map { $0.change[keyPath: field].changes },
                changes.map { $0.change[keyPath: field].value.map(text) ?? "" }
            )
        }
        let platform = column(\.platform, \.rawValue)
        let locale = column(\.locale, { $0 })
        let timeZone = column(\.timeZone, { $0 })
        let appVersion = column(\.appVersion, { $0 })
        try await connection.run(
            #"""
            UPDATE token SET
              platform = CASE WHEN c."setPlatform" THEN NULLIF(c.platform, '') ELSE token.platform END,
              locale = CASE WHEN c."setLocale" THEN NULLIF(c.locale, '') ELSE token.locale END,
              "timeZone" = CASE WHEN c."setTimeZone" THEN NULLIF(c."timeZone", '') ELSE token."timeZone" END,
              "appVersion" = CASE WHEN c."setAppVersion" THEN NULLIF(c."appVersion", '') ELSE token."appVersion" END,
              "lastSeenAt" = c."seenAt"
            FROM unnest(
              \#(changes.map { Int32($0.token) })::int[], \#(platform.changes)::bool[], \#(platform.values)::text[],
              \#(locale.changes)::bool[], \#(locale.values)::text[], \#(timeZone.changes)::bool[],
              \#(timeZone.values)::text[], \#(appVersion.changes)::bool[], \#(appVersion.values)::text[],
              \#(changes.map(\.seenAt))::bigint[]
            ) AS c(id, "setPlatform", platform, "setLocale", locale, "setTimeZone", "timeZone", "setAppVersion",
                   "appVersion", "seenAt")
            WHERE token.id = c.id
            """#)
    }

    public func markSeen(_ tokens: [Int64], at now: Int64) async throws {
        try await connection.run(
            #"UPDATE token SET "lastSeenAt" = \#(now) WHERE id = ANY(\#(tokens.map { Int32($0) }))"#)
    }

    public func tokenInfo(_ value: String, in project: Int64) async throws -> TokenInfo? {
        try await connection.tokenInfo(value, in: project)
    }

    public func tokenInfos(_ values: [String], in project: Int64) async throws -> [String: TokenInfo] {
        var infos: [String: TokenInfo] = [:]
        for try await row in try await connection.query(
            #"""
            SELECT \#(unescaped: TokenInfo.postgresColumns) FROM token
            WHERE "projectId" = \#(project) AND value = ANY(\#(values))
            """#, logger: .silent
        ).decode(TokenInfo.PostgresRow.self) {
            infos[row.0] = TokenInfo(postgresRow: row)
        }
        return infos
    }

    public func rekeyRows(from: String, to: String, in project: Int64, at now: Int64) async throws
        -> (from: WriteTokenRow?, to: WriteTokenRow)
    {
        // Both rows, locked in sorted order: a re-key the other way round waits, never deadlocks.
        let rows = try await connection.lockedTokensRegistering([from, to], in: project, now: now)
        guard let target = rows[to] else { throw RegistryWriteFailure("the re-key target was not registered") }
        return (rows[from]?.writeRow, target.writeRow)
    }

    public func insertAudit(_ audit: AuditWrite?) async throws {
        try await PostgresStore.insertAudit(connection, audit)
    }

    // MARK: - Topics

    public func topicID(_ name: String, in project: Int64) async throws -> Int64? {
        try await connection.first(
            #"SELECT id FROM topic WHERE "projectId" = \#(project) AND name = \#(name)"#, as: Int64.self)
    }

    public func topicCreating(_ name: String, in project: Int64, at now: Int64) async throws
        -> (id: Int64, created: Bool)
    {
        try await connection.heldTopic(name, inProject: project, createdAt: now)
    }

    public func topics(ofToken token: Int64) async throws -> [(id: Int64, name: String)] {
        try await connection.topicsOf(Int32(token))
    }

    public func leaveTopics(_ token: Int64) async throws -> [(id: Int64, name: String)] {
        var topics: [(id: Int64, name: String)] = []
        for try await (id, name) in try await connection.query(
            #"""
            WITH gone AS (DELETE FROM subscription WHERE "tokenId" = \#(Int32(token)) RETURNING "topicId")
            SELECT topic.id, topic.name FROM gone JOIN topic ON topic.id = gone."topicId" ORDER BY topic.name
            """#, logger: .silent
        ).decode((Int64, String).self) { topics.append((id, name)) }
        return topics
    }

    public func joinTopic(_ topic: Int64, token: Int64, at now: Int64) async throws -> Bool {
        try await connection.count(
            #"""
            INSERT INTO subscription ("topicId", "tokenId", "createdAt") VALUES (\#(topic), \#(Int32(token)), \#(now))
            ON CONFLICT DO NOTHING RETURNING 1
            """#) > 0
    }

    public func deleteSubscriptions(ofToken token: Int64) async throws {
        try await connection.run(#"DELETE FROM subscription WHERE "tokenId" = \#(Int32(token))"#)
    }

    public func subscribed(_ tokens: [Int64], to topic: Int64) async throws -> Set<Int64> {
        var subscribed: Set<Int64> = []
        for try await id in try await connection.query(
            #"SELECT "tokenId" FROM subscription WHERE "topicId" = \#(topic) AND "tokenId" = ANY(\#(tokens.map { Int32($0) }))"#,
            logger: .silent
        ).decode(Int32.self) { subscribed.insert(Int64(id)) }
        return subscribed
    }

    public func topicCounts(of tokens: [Int64]) async throws -> [Int64: Int] {
        var counts: [Int64: Int] = [:]
        for try await (id, count) in try await connection.query(
            #"""
            SELECT "tokenId", COUNT(*)::bigint FROM subscription WHERE "tokenId" = ANY(\#(tokens.map { Int32($0) }))
            GROUP BY "tokenId"
            """#, logger: .silent
        ).decode((Int32, Int64).self) { counts[Int64(id)] = Int(count) }
        return counts
    }

    public func insertSubscriptions(_ tokens: [Int64], to topic: Int64, at now: Int64) async throws {
        try await connection.run(
            #"""
            INSERT INTO subscription ("topicId", "tokenId", "createdAt")
            SELECT \#(topic), id, \#(now) FROM unnest(\#(tokens.map { Int32($0) })::integer[]) AS id
            """#)
    }

    public func deleteSubscriptions(_ tokens: [Int64], from topic: Int64) async throws -> [Int64] {
        var deleted: [Int64] = []
        for try await id in try await connection.query(
            #"""
            DELETE FROM subscription WHERE "topicId" = \#(topic) AND "tokenId" = ANY(\#(tokens.map { Int32($0) }))
            RETURNING "tokenId"
            """#, logger: .silent
        ).decode(Int32.self) { deleted.append(Int64(id)) }
        return deleted
    }

    public func deleteTopicIfEmpty(_ topic: Int64) async throws {
        try await connection.removeTopicIfEmpty(topic)
    }

    public func deleteTopic(_ topic: Int64) async throws {
        try await connection.run(#"DELETE FROM topic WHERE id = \#(topic)"#)
    }

    // MARK: - Groups

    public func insertGroup(_ name: String, in project: Int64, at now: Int64) async throws -> Int64 {
        // The unique index on (projectId, name) is the check; a second server's create of the
        // same name waits on it, then fails here.
        do {
            return try await connection.one(
                #"INSERT INTO "deviceGroup" ("projectId", name, "createdAt") VALUES (\#(project), \#(name), \#(now)) RETURNING id"#,
                as: Int64.self)
        } catch let error as PSQLError where error.serverInfo?[.sqlState] == "23505" {
            throw RegistryError.groupNameTaken
        }
    }

    public func groupName(_ group: Int64, in project: Int64) async throws -> String? {
        try await connection.first(
            #"SELECT name FROM "deviceGroup" WHERE id = \#(group) AND "projectId" = \#(project) FOR UPDATE"#,
            as: String.self)
    }

    public func members(of group: Int64) async throws -> Set<Int64> {
        var members: Set<Int64> = []
        for try await token in try await connection.query(
            #"SELECT "tokenId" FROM "groupMember" WHERE "groupId" = \#(group)"#, logger: .silent
        ).decode(Int32.self) { members.insert(Int64(token)) }
        return members
    }

    public func insertMembers(_ tokens: [Int64], into group: Int64, at now: Int64) async throws {
        try await connection.insertMembers(tokens.map { Int32($0) }, into: group, now: now)
    }

    public func deleteMembers(_ tokens: [Int64], from group: Int64) async throws {
        try await connection.run(
            #"DELETE FROM "groupMember" WHERE "groupId" = \#(group) AND "tokenId" = ANY(\#(tokens.map { Int32($0) }))"#)
    }

    public func joinGroup(_ group: Int64, token: Int64, at now: Int64) async throws {
        try await connection.run(
            #"""
            INSERT INTO "groupMember" ("groupId", "tokenId", "addedAt") VALUES (\#(group), \#(Int32(token)), \#(now))
            ON CONFLICT DO NOTHING
            """#)
    }

    public func groupNames(ofToken token: Int64) async throws -> [String] {
        var names: [String] = []
        for try await name in try await connection.query(
            #"""
            SELECT "deviceGroup".name FROM "groupMember" JOIN "deviceGroup" ON "deviceGroup".id = "groupMember"."groupId"
            WHERE "groupMember"."tokenId" = \#(Int32(token)) ORDER BY "deviceGroup".name
            """#, logger: .silent
        ).decode(String.self) { names.append(name) }
        return names
    }

    public func leaveGroups(_ token: Int64) async throws -> [Int64] {
        let groups = try await connection.lockedGroupsOf(Int32(token))
        guard !groups.isEmpty else { return [] }
        try await connection.run(#"DELETE FROM "groupMember" WHERE "tokenId" = \#(Int32(token))"#)
        return groups
    }
}

extension PostgresStore: RegistryWriting {
    public func writing<Value: Sendable>(
        _ body: @escaping @Sendable (PostgresWriteDriver, ChangeLog) async throws -> Value
    ) async throws -> Committed<Value> {
        try await committing { connection, log in try await body(PostgresWriteDriver(connection: connection), log) }
    }
}

extension PostgresTokenRow {
    var writeRow: WriteTokenRow { WriteTokenRow(id: Int64(id), state: state, isNew: isNew) }
}

extension PostgresConnection {
    /// The statements the import (`PostgresArchiveDriver`) and the registry's writes share
    /// (`RegistryRowStatements`), written once.
    func memberCount(of group: Int64) async throws -> Int {
        Int(try await one(#"SELECT COUNT(*)::bigint FROM "groupMember" WHERE "groupId" = \#(group)"#, as: Int64.self))
    }

    func deleteGroup(_ group: Int64) async throws {
        try await run(#"DELETE FROM "deviceGroup" WHERE id = \#(group)"#)
    }
}
