import AudienceEngine
import Foundation
import PostgresNIO
import Registry

/// Tokens: their state, unregistering (out of every group and topic at once) and re-keying. Locks
/// in the order every write takes them: token rows (sorted), topic rows (by name), group rows (by id).
extension PostgresStore {
    public func token(_ token: String, in project: Project) async throws -> TokenInfo? {
        try await database.withConnection { connection in try await connection.tokenInfo(token, in: project) }
    }

    public func tokens(in project: Project, prefix: String, after: String?, limit: Int) async throws
        -> Page<TokenInfo>
    {
        try await database.withConnection { connection in
            // Values compare bytewise (`COLLATE "C"`, the index of migration v8), as SQLite compares
            // them, so a prefix is one range: [prefix, prefix + U+10FFFF).
            let (lower, start) =
                after.map { $0.utf8.lexicographicallyPrecedes(prefix.utf8) } == false
                ? (">", after ?? "") : (">=", prefix)
            let end = prefix.isEmpty ? nil : prefix + "\u{10FFFF}"
            var items: [TokenInfo] = []
            for try await row in try await connection.query(
                #"""
                SELECT \#(unescaped: TokenInfo.postgresColumns) FROM token
                WHERE "projectId" = \#(project.rowID) AND value COLLATE "C" \#(unescaped: lower) \#(start)
                  AND value COLLATE "C" < COALESCE(\#(end)::text, value || 'x') COLLATE "C"
                ORDER BY value COLLATE "C" LIMIT \#(limit + 1)
                """#, logger: .silent
            ).decode(TokenInfo.PostgresRow.self) {
                items.append(TokenInfo(postgresRow: row))
            }
            let page = Array(items.prefix(limit))
            return Page(items: page, nextAfter: items.count > limit ? page.last?.token : nil)
        }
    }

    public func groups(ofToken token: String, in project: Project) async throws -> [Membership] {
        try await database.withConnection { connection in
            var groups: [Membership] = []
            for try await (name, addedAt) in try await connection.query(
                #"""
                SELECT "deviceGroup".name, "groupMember"."addedAt" FROM "groupMember"
                JOIN "deviceGroup" ON "deviceGroup".id = "groupMember"."groupId"
                JOIN token ON token.id = "groupMember"."tokenId"
                WHERE token."projectId" = \#(project.rowID) AND token.value = \#(token)
                ORDER BY "deviceGroup".name
                """#, logger: .silent
            ).decode((String, Int64).self) { groups.append(Membership(name: name, since: EpochMilliseconds.date(addedAt))) }
            return groups
        }
    }

    public func tokenValues(ids: [UInt32], in project: Project) async throws -> [String] {
        guard !ids.isEmpty else { return [] }
        return try await database.withConnection { connection in
            var values: [String] = []
            for try await value in try await connection.query(
                #"SELECT value FROM token WHERE "projectId" = \#(project.rowID) AND id = ANY(\#(ids.map { Int32(bitPattern: $0) })) ORDER BY id"#,
                logger: .silent
            ).decode(String.self) { values.append(value) }
            return values
        }
    }

    public func tokenIDs(_ tokens: [String], in project: Project) async throws -> [String: UInt32] {
        guard !tokens.isEmpty else { return [:] }
        return try await database.withConnection { connection in
            var ids: [String: UInt32] = [:]
            for try await (id, value) in try await connection.query(
                #"SELECT id, value FROM token WHERE "projectId" = \#(project.rowID) AND state = 'registered' AND value = ANY(\#(tokens))"#,
                logger: .silent
            ).decode((Int32, String).self) { ids[value] = UInt32(id) }
            return ids
        }
    }

    public func tokenID(_ token: String, in project: Project) async throws -> UInt32? {
        try await database.withConnection { connection in
            try await connection.first(
                #"SELECT id FROM token WHERE "projectId" = \#(project.rowID) AND value = \#(token)"#, as: Int32.self
            ).map { UInt32(bitPattern: $0) }
        }
    }

    public func tokensOfOtherSenders(_ tokens: [String], notIn project: Project) async throws -> Set<String> {
        guard !tokens.isEmpty else { return [] }
        return try await database.withConnection { connection in
            var others: Set<String> = []
            for try await value in try await connection.query(
                #"""
                SELECT DISTINCT token.value FROM token
                WHERE token.value = ANY(\#(tokens)) AND token."projectId" <> \#(project.rowID) AND token.state = 'registered'
                  AND NOT EXISTS (SELECT 1 FROM token AS own WHERE own."projectId" = \#(project.rowID) AND own.value = token.value)
                """#, logger: .silent
            ).decode(String.self) { others.insert(value) }
            return others
        }
    }
}

extension PostgresConnection {
    func tokenInfo(_ token: String, in project: Project) async throws -> TokenInfo? {
        try await tokenInfo(token, in: project.rowID)
    }

    func tokenInfo(_ token: String, in project: Int64) async throws -> TokenInfo? {
        try await first(
            #"""
            SELECT \#(unescaped: TokenInfo.postgresColumns) FROM token
            WHERE "projectId" = \#(project) AND value = \#(token)
            """#,
            as: TokenInfo.PostgresRow.self
        ).map(TokenInfo.init(postgresRow:))
    }

    /// The token's topics, by name: the order their rows are locked in.
    func topicsOf(_ tokenID: Int32) async throws -> [(id: Int64, name: String)] {
        var topics: [(id: Int64, name: String)] = []
        for try await (id, name) in try await query(
            #"""
            SELECT topic.id, topic.name FROM subscription JOIN topic ON topic.id = subscription."topicId"
            WHERE subscription."tokenId" = \#(tokenID) ORDER BY topic.name
            """#, logger: .silent
        ).decode((Int64, String).self) { topics.append((id, name)) }
        return topics
    }

    /// The ids of the token's groups, their rows locked in id order.
    func lockedGroupsOf(_ tokenID: Int32) async throws -> [Int64] {
        var ids: [Int64] = []
        for try await id in try await query(
            #"""
            SELECT id FROM "deviceGroup" WHERE id IN (SELECT "groupId" FROM "groupMember" WHERE "tokenId" = \#(tokenID))
            ORDER BY id FOR UPDATE
            """#, logger: .silent
        ).decode(Int64.self) { ids.append(id) }
        return ids
    }
}
