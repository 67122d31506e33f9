import Foundation
import PostgresNIO
import Registry

/// `export`: the registry as archive records, from one snapshot (a REPEATABLE READ transaction),
/// in the order and shapes the SQLite store writes them, so either store reads what the other wrote.
extension PostgresStore {
    /// Tokens read per step: their subscriptions come in one query per step.
    static let exportStep: Int32 = 256

    public func export(
        project: String?, ownSecret secret: [UInt8], to emit: @escaping @Sendable (ArchiveRecord) throws -> Void
    ) async throws {
        try await snapshotRead(bounded: false) { connection in
            // Each statement's rows are read to the end before the next is sent: one connection
            // carries one statement at a time.
            var rows: [(Int64, String, String, Int64)] = []
            for try await row in try await connection.query(
                #"SELECT id, "projectId", "senderId", "createdAt" FROM project WHERE \#(project)::text IS NULL OR "projectId" = \#(project) ORDER BY id"#,
                logger: .silent
            ).decode((Int64, String, String, Int64).self) { rows.append(row) }
            var projects: [(rowID: Int64, name: String)] = []
            for (rowID, name, senderID, createdAt) in rows {
                projects.append((rowID, name))
                try emit(.project(try await Self.projectArchive(
                    connection, rowID: rowID, name: name, senderID: senderID, createdAt: createdAt, ownSecret: secret)))
                for try await (topic, topicCreated) in try await connection.query(
                    #"SELECT name, "createdAt" FROM topic WHERE "projectId" = \#(rowID) ORDER BY name"#, logger: .silent
                ).decode((String, Int64).self) {
                    try emit(.topic(TopicArchive(project: name, name: topic, createdAt: EpochMilliseconds.date(topicCreated))))
                }
            }
            let names = Dictionary(uniqueKeysWithValues: projects.map { ($0.rowID, $0.name) })
            try await Self.exportTokens(connection, projects: names, to: emit)
            for (rowID, name) in projects {
                try await Self.exportGroups(
                    connection, project: rowID, named: name,
                    ownKeyring: NotificationKeyring(secret: secret, sealedFor: rowID), to: emit)
            }
        }
    }

    private static func projectArchive(
        _ connection: PostgresConnection, rowID: Int64, name: String, senderID: String, createdAt: Int64,
        ownSecret: [UInt8]
    ) async throws -> ProjectArchive {
        var serverKeys: [ServerKeyArchive] = []
        for try await (hash, created, revoked, name, scopes) in try await connection.query(
            #"SELECT "keyHash", "createdAt", "revokedAt", name, scopes FROM "serverKey" WHERE "projectId" = \#(rowID) ORDER BY id"#,
            logger: .silent
        ).decode((Data, Int64, Int64?, String, Int).self) {
            serverKeys.append(
                ServerKeyArchive(
                    sha256: Base64URL.encode([UInt8](hash)), createdAt: EpochMilliseconds.date(created),
                    revokedAt: revoked.map(EpochMilliseconds.date), name: name, scopes: KeyScopes(rawValue: scopes).names))
        }
        var accounts: [ServiceAccountArchive] = []
        for try await (keyID, email, clientID, key, uri, created, revoked, scopes) in try await connection.query(
            #"SELECT \#(unescaped: accountColumns) FROM "serviceAccount" WHERE "projectId" = \#(rowID) ORDER BY id"#,
            logger: .silent
        ).decode((String, String, String, String, String?, Int64, Int64?, Int?).self) {
            accounts.append(
                ServiceAccountArchive(serviceAccount(keyID, email, clientID, key, uri, created, revoked, scopes)))
        }
        var keyrings = [NotificationKeyring(secret: ownSecret, sealedFor: rowID)]
        for try await (secret, sealedFor) in try await connection.query(
            #"SELECT secret, "sealedFor" FROM keyring WHERE "projectId" = \#(rowID) ORDER BY id"#, logger: .silent
        ).decode((Data, Int64).self) {
            keyrings.append(NotificationKeyring(secret: [UInt8](secret), sealedFor: sealedFor))
        }
        return ProjectArchive(
            projectId: name, senderId: senderID, createdAt: EpochMilliseconds.date(createdAt), serverKeys: serverKeys,
            serviceAccounts: accounts, keyrings: keyrings.map(KeyringArchive.init))
    }

    /// Tokens in id order, a step at a time, each with its topics by name; tokens of projects not
    /// exported are skipped.
    private static func exportTokens(
        _ connection: PostgresConnection, projects: [Int64: String], to emit: (ArchiveRecord) throws -> Void
    ) async throws {
        var after: Int32 = 0
        while true {
            var tokens: [(id: Int32, project: Int64, info: TokenInfo, seen: Int64?)] = []
            for try await row in try await connection.query(
                #"""
                SELECT id, "projectId", \#(unescaped: TokenInfo.postgresColumns) FROM token
                WHERE id > \#(after) ORDER BY id LIMIT \#(exportStep)
                """#, logger: .silent
            ).decode((Int32, Int64, String, String, Int64, Int64, Int64?, String?, String?, String?, String?).self) {
                let info = TokenInfo(postgresRow: (row.2, row.3, row.4, row.5, row.6, row.7, row.8, row.9, row.10))
                tokens.append((row.0, row.1, info, row.6))
            }
            guard let first = tokens.first, let last = tokens.last else { return }
            after = last.id
            guard tokens.contains(where: { projects[$0.project] != nil }) else { continue }
            var topics: [Int32: [Joined]] = [:]
            for try await (tokenID, name, since) in try await connection.query(
                #"""
                SELECT subscription."tokenId", topic.name, subscription."createdAt"
                FROM subscription JOIN topic ON topic.id = subscription."topicId"
                WHERE subscription."tokenId" BETWEEN \#(first.id) AND \#(last.id)
                """#, logger: .silent
            ).decode((Int32, String, Int64).self) {
                topics[tokenID, default: []].append(Joined(name: name, since: EpochMilliseconds.date(since)))
            }
            for token in tokens {
                guard let name = projects[token.project] else { continue }
                try emit(
                    .token(
                        TokenArchive(
                            project: name, token: token.info.token, state: token.info.state,
                            createdAt: token.info.createdAt, updatedAt: token.info.updatedAt,
                            topics: (topics[token.id] ?? []).sorted { $0.name < $1.name },
                            lastSeenAt: token.seen.map(EpochMilliseconds.date), attributes: token.info.attributes)))
            }
        }
    }

    /// Groups in id order, each with its members (in token-id order), its id under every keyring
    /// of the project and the keys it was imported with.
    private static func exportGroups(
        _ connection: PostgresConnection, project: Int64, named name: String, ownKeyring: NotificationKeyring,
        to emit: (ArchiveRecord) throws -> Void
    ) async throws {
        var groups: [(id: Int64, name: String, created: Int64, complete: Bool)] = []
        for try await group in try await connection.query(
            #"SELECT id, name, "createdAt", complete FROM "deviceGroup" WHERE "projectId" = \#(project) ORDER BY id"#,
            logger: .silent
        ).decode((Int64, String, Int64, Bool).self) { groups.append(group) }
        for group in groups {
            var members: [GroupArchive.Member] = []
            for try await (token, since) in try await connection.query(
                #"""
                SELECT token.value, "groupMember"."addedAt" FROM "groupMember" JOIN token ON token.id = "groupMember"."tokenId"
                WHERE "groupMember"."groupId" = \#(group.id) ORDER BY "groupMember"."tokenId"
                """#, logger: .silent
            ).decode((String, Int64).self) { members.append(GroupArchive.Member(token: token, since: EpochMilliseconds.date(since))) }
            var keyringIDs = [GroupArchive.KeyringID(keyring: ownKeyring.fingerprint, group: group.id)]
            for try await (secret, sealedFor, source) in try await connection.query(
                #"""
                SELECT keyring.secret, keyring."sealedFor", "keyringGroup"."sourceGroupId" FROM "keyringGroup"
                JOIN keyring ON keyring.id = "keyringGroup"."keyringId"
                WHERE "keyringGroup"."groupId" = \#(group.id) ORDER BY keyring.id, "keyringGroup"."sourceGroupId"
                """#, logger: .silent
            ).decode((Data, Int64, Int64).self) {
                keyringIDs.append(
                    GroupArchive.KeyringID(
                        keyring: NotificationKeyring(secret: [UInt8](secret), sealedFor: sealedFor).fingerprint, group: source))
            }
            var keys: [String] = []
            for try await key in try await connection.query(
                #"SELECT "notificationKey" FROM "importedKey" WHERE "groupId" = \#(group.id) ORDER BY "notificationKey""#,
                logger: .silent
            ).decode(String.self) { keys.append(key) }
            try emit(
                .group(
                    GroupArchive(
                        project: name, name: group.name, createdAt: EpochMilliseconds.date(group.created), members: members,
                        keyringIds: keyringIDs, notificationKeys: keys, complete: group.complete)))
        }
    }
}
