import Foundation
import PostgresNIO
import Registry

/// The import's statements on PostgreSQL, on the connection of one batch's transaction (the
/// rules are `ArchiveMerge`'s). A statement over many tokens is one round trip: the values
/// travel as arrays and `unnest` turns them into rows.
struct PostgresArchiveDriver: ArchiveMergeDriver {
    let connection: PostgresConnection

    // MARK: - Projects and credentials

    func project(_ projectId: String) async throws -> (rowID: Int64, senderId: String)? {
        try await connection.first(
            #"SELECT id, "senderId" FROM project WHERE "projectId" = \#(projectId)"#, as: (Int64, String).self)
    }

    func project(sendingAs senderId: String) async throws -> String? {
        try await connection.first(#"SELECT "projectId" FROM project WHERE "senderId" = \#(senderId)"#, as: String.self)
    }

    func insertProject(_ record: ProjectArchive) async throws -> Int64 {
        try await connection.one(
            #"""
            INSERT INTO project ("projectId", "senderId", "createdAt")
            VALUES (\#(record.projectId), \#(record.senderId), \#(EpochMilliseconds.milliseconds(record.createdAt))) RETURNING id
            """#, as: Int64.self)
    }

    func serverKey(_ hash: [UInt8]) async throws -> CredentialRow? {
        try await connection.first(
            #"SELECT "projectId", "revokedAt" FROM "serverKey" WHERE "keyHash" = \#(Data(hash))"#,
            as: (Int64, Int64?).self
        ).map { CredentialRow(project: $0, revokedAt: $1) }
    }

    func insertServerKey(
        _ hash: [UInt8], createdAt: Int64, revokedAt: Int64?, name: String, scopes: Int, of project: Int64
    ) async throws {
        try await connection.run(
            #"""
            INSERT INTO "serverKey" ("projectId", "keyHash", "createdAt", "revokedAt", name, scopes)
            VALUES (\#(project), \#(Data(hash)), \#(createdAt), \#(revokedAt), \#(name), \#(scopes))
            """#)
    }

    func revokeServerKey(_ hash: [UInt8], at revokedAt: Int64) async throws {
        try await connection.run(
            #"UPDATE "serverKey" SET "revokedAt" = \#(revokedAt) WHERE "keyHash" = \#(Data(hash))"#)
    }

    func serviceAccount(_ keyId: String) async throws -> CredentialRow? {
        try await connection.first(
            #"SELECT "projectId", "revokedAt" FROM "serviceAccount" WHERE "keyId" = \#(keyId)"#,
            as: (Int64, Int64?).self
        ).map { CredentialRow(project: $0, revokedAt: $1) }
    }

    func insertServiceAccount(_ account: ServiceAccountArchive, revokedAt: Int64?, of project: Int64) async throws {
        try await connection.run(
            #"""
            INSERT INTO "serviceAccount" ("projectId", "keyId", "clientEmail", "clientId", "publicKey", "tokenUri", "createdAt", "revokedAt", scopes)
            VALUES (\#(project), \#(account.keyId), \#(account.clientEmail), \#(account.clientId), \#(account.publicKey),
                    \#(account.tokenUri), \#(EpochMilliseconds.milliseconds(account.createdAt)), \#(revokedAt),
                    \#(try account.scopeBits()))
            """#)
    }

    func revokeServiceAccount(_ keyId: String, at revokedAt: Int64) async throws {
        try await connection.run(#"UPDATE "serviceAccount" SET "revokedAt" = \#(revokedAt) WHERE "keyId" = \#(keyId)"#)
    }

    func insertKeyring(
        _ fingerprint: String, secret: [UInt8], sealedFor: Int64, of project: Int64, at importedAt: Int64
    ) async throws -> Bool {
        try await connection.count(
            #"""
            INSERT INTO keyring ("projectId", fingerprint, secret, "sealedFor", "importedAt")
            VALUES (\#(project), \#(fingerprint), \#(Data(secret)), \#(sealedFor), \#(importedAt))
            ON CONFLICT ("projectId", fingerprint) DO NOTHING RETURNING 1
            """#) > 0
    }

    func keyringCount(of project: Int64) async throws -> Int {
        Int(
            try await connection.one(
                #"SELECT COUNT(*)::bigint FROM keyring WHERE "projectId" = \#(project)"#, as: Int64.self))
    }

    func keyring(_ fingerprint: String, of project: Int64) async throws -> Int64? {
        try await connection.first(
            #"SELECT id FROM keyring WHERE "projectId" = \#(project) AND fingerprint = \#(fingerprint)"#, as: Int64.self
        )
    }

    // MARK: - Topics and tokens

    /// Held `FOR KEY SHARE` until the batch commits, as every subscriber holds it: no write
    /// removes it as empty meanwhile.
    func topic(_ name: String, in project: Int64, createdAt: Int64) async throws -> (id: Int64, created: Bool) {
        try await connection.heldTopic(name, inProject: project, createdAt: createdAt)
    }

    func insertTokens(_ tokens: [NewToken], in project: Int64) async throws -> [String: TokenRowState] {
        var inserted: [String: TokenRowState] = [:]
        let updated = Dictionary(tokens.map { ($0.value, $0.updatedAt) }, uniquingKeysWith: { first, _ in first })
        for try await (id, value, state) in try await connection.query(
            #"""
            INSERT INTO token (
              "projectId", value, state, "createdAt", "updatedAt", "lastSeenAt", platform, locale, "timeZone",
              "appVersion")
            SELECT \#(project), value, state, created, updated, NULLIF(seen, -1), NULLIF(platform, ''),
                   NULLIF(locale, ''), NULLIF(zone, ''), NULLIF(version, '')
            FROM unnest(\#(tokens.map(\.value))::text[], \#(tokens.map(\.state.rawValue))::text[],
                        \#(tokens.map(\.createdAt))::bigint[], \#(tokens.map(\.updatedAt))::bigint[],
                        \#(tokens.map { $0.lastSeenAt ?? -1 })::bigint[],
                        \#(tokens.map { $0.attributes.platform?.rawValue ?? "" })::text[],
                        \#(tokens.map { $0.attributes.locale ?? "" })::text[],
                        \#(tokens.map { $0.attributes.timeZone ?? "" })::text[],
                        \#(tokens.map { $0.attributes.appVersion ?? "" })::text[])
                 AS listed(value, state, created, updated, seen, platform, locale, zone, version)
            ON CONFLICT ("projectId", value) DO NOTHING RETURNING id, value, state
            """#, logger: .silent
        ).decode((Int32, String, String).self) {
            inserted[value] = TokenRowState(
                id: Int64(id), state: TokenState(rawValue: state) ?? .registered, updatedAt: updated[value] ?? 0)
        }
        return inserted
    }

    func tokens(_ values: [String], in project: Int64) async throws -> [String: TokenRowState] {
        var found: [String: TokenRowState] = [:]
        for try await (id, value, state, stamp) in try await connection.query(
            #"SELECT id, value, state, "updatedAt" FROM token WHERE "projectId" = \#(project) AND value = ANY(\#(values))"#,
            logger: .silent
        ).decode((Int32, String, String, Int64).self) {
            found[value] = TokenRowState(
                id: Int64(id), state: TokenState(rawValue: state) ?? .registered, updatedAt: stamp)
        }
        return found
    }

    func reregister(_ token: Int64, at updatedAt: Int64) async throws {
        try await connection.run(
            #"UPDATE token SET state = 'registered', "updatedAt" = \#(updatedAt) WHERE id = \#(Int32(token))"#)
    }

    func subscribe(_ subscriptions: [NewSubscription]) async throws -> [(topic: Int64, token: Int64)] {
        var added: [(topic: Int64, token: Int64)] = []
        for try await (topic, token) in try await connection.query(
            #"""
            INSERT INTO subscription ("topicId", "tokenId", "createdAt")
            SELECT topic, token, since
            FROM unnest(\#(subscriptions.map(\.topic))::bigint[], \#(subscriptions.map { Int32($0.token) })::integer[],
                        \#(subscriptions.map(\.since))::bigint[])
                 AS listed(topic, token, since)
            ON CONFLICT DO NOTHING RETURNING "topicId", "tokenId"
            """#, logger: .silent
        ).decode((Int64, Int32).self) { added.append((topic, Int64(token))) }
        return added
    }

    func tokens(_ ids: [Int64], withMoreTopicsThan limit: Int) async throws -> [Int64] {
        var over: [Int64] = []
        for try await token in try await connection.query(
            #"""
            SELECT "tokenId" FROM subscription WHERE "tokenId" = ANY(\#(ids.map { Int32($0) })) GROUP BY "tokenId"
            HAVING COUNT(*) > \#(Int64(limit))
            """#, logger: .silent
        ).decode(Int32.self) { over.append(Int64(token)) }
        return over
    }

    // MARK: - Groups and notification keys

    func group(_ name: String, in project: Int64) async throws -> Int64? {
        try await connection.first(
            #"SELECT id FROM "deviceGroup" WHERE "projectId" = \#(project) AND name = \#(name)"#, as: Int64.self)
    }

    func insertGroup(_ name: String, createdAt: Int64, complete: Bool, in project: Int64) async throws -> Int64 {
        try await connection.one(
            #"""
            INSERT INTO "deviceGroup" ("projectId", name, "createdAt", complete)
            VALUES (\#(project), \#(name), \#(createdAt), \#(complete)) RETURNING id
            """#, as: Int64.self)
    }

    func markIncomplete(_ group: Int64) async throws {
        try await connection.run(#"UPDATE "deviceGroup" SET complete = false WHERE id = \#(group)"#)
    }

    func addMembers(_ members: [(token: Int64, since: Int64)], to group: Int64) async throws -> Int {
        try await connection.count(
            #"""
            INSERT INTO "groupMember" ("groupId", "tokenId", "addedAt")
            SELECT \#(group), token, since
            FROM unnest(\#(members.map { Int32($0.token) })::integer[], \#(members.map(\.since))::bigint[]) AS listed(token, since)
            ON CONFLICT DO NOTHING RETURNING 1
            """#)
    }

    func memberCount(of group: Int64) async throws -> Int { try await connection.memberCount(of: group) }
    func deleteGroup(_ group: Int64) async throws { try await connection.deleteGroup(group) }

    func mapKeyring(_ keyring: Int64, sourceGroup: Int64, to group: Int64) async throws {
        try await connection.run(
            #"""
            INSERT INTO "keyringGroup" ("keyringId", "sourceGroupId", "groupId") VALUES (\#(keyring), \#(sourceGroup), \#(group))
            ON CONFLICT ("keyringId", "sourceGroupId") DO UPDATE SET "groupId" = excluded."groupId"
            """#)
    }

    func keepImportedKey(_ key: String, naming group: Int64, in project: Int64, at importedAt: Int64) async throws
        -> Bool
    {
        try await connection.count(
            #"""
            INSERT INTO "importedKey" ("projectId", "notificationKey", "groupId", "importedAt")
            VALUES (\#(project), \#(key), \#(group), \#(importedAt))
            ON CONFLICT ("projectId", "notificationKey") DO UPDATE SET "groupId" = excluded."groupId"
            WHERE "importedKey"."groupId" IS NULL
            RETURNING 1
            """#) > 0
    }

    func groupNamed(byImportedKey key: String, in project: Int64) async throws -> (id: Int64, name: String)? {
        try await connection.first(
            #"""
            SELECT "deviceGroup".id, "deviceGroup".name FROM "importedKey"
            JOIN "deviceGroup" ON "deviceGroup".id = "importedKey"."groupId"
            WHERE "importedKey"."projectId" = \#(project) AND "importedKey"."notificationKey" = \#(key)
            """#, as: (Int64, String).self)
    }

    // MARK: - Errors

    /// Class 23 is integrity constraint violation.
    func conflict(in error: any Error) -> String? {
        guard let error = error as? PSQLError, error.serverInfo?[.sqlState]?.hasPrefix("23") == true else { return nil }
        return error.serverInfo?[.message] ?? ""
    }
}
