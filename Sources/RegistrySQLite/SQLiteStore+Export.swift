import Foundation
import GRDB
import Registry

/// `export`: the registry as archive records, from one read transaction (a snapshot).
extension SQLiteStore {
    /// Tokens read per step: their subscriptions come in one query per step. Small enough that a
    /// step of tokens at the topic limit stays some tens of megabytes.
    static let exportStep = 256

    /// Every project's record and topics, then every token in id order in one pass over the table,
    /// then every project's groups: one walk of the token table whatever the number of projects.
    public func export(
        project: String?, ownSecret secret: [UInt8], to emit: @escaping @Sendable (ArchiveRecord) throws -> Void
    ) async throws {
        try await read { db in
            let projects = try Row.fetchAll(
                db, sql: "SELECT * FROM project WHERE ?1 IS NULL OR projectId = ?1 ORDER BY id", arguments: [project])
            var names: [Int64: String] = [:]
            for row in projects {
                let (rowID, name): (Int64, String) = (row["id"], row["projectId"])
                names[rowID] = name
                try emit(.project(Self.projectArchive(db, row, ownSecret: secret)))
                let topics = try Row.fetchCursor(
                    db, sql: "SELECT name, createdAt FROM topic WHERE projectId = ? ORDER BY name", arguments: [rowID])
                while let topic = try topics.next() {
                    try emit(.topic(TopicArchive(project: name, name: topic["name"], createdAt: EpochMilliseconds.date(topic["createdAt"]))))
                }
            }
            try Self.exportTokens(db, projects: names, to: emit)
            for row in projects {
                let (rowID, name): (Int64, String) = (row["id"], row["projectId"])
                try Self.exportGroups(db, project: rowID, named: name, ownKeyring: Self.ownKeyring(secret, rowID), to: emit)
            }
        }
    }

    private static func ownKeyring(_ secret: [UInt8], _ projectRowID: Int64) -> NotificationKeyring {
        NotificationKeyring(secret: secret, sealedFor: projectRowID)
    }

    private static func projectArchive(_ db: Database, _ row: Row, ownSecret: [UInt8]) throws -> ProjectArchive {
        let rowID: Int64 = row["id"]
        let serverKeys = try Row.fetchAll(
            db, sql: "SELECT keyHash, createdAt, revokedAt, name, scopes FROM serverKey WHERE projectId = ? ORDER BY id",
            arguments: [rowID]
        ).map {
            ServerKeyArchive(
                sha256: Base64URL.encode([UInt8]($0["keyHash"] as Data)), createdAt: EpochMilliseconds.date($0["createdAt"]),
                revokedAt: ($0["revokedAt"] as Int64?).map(EpochMilliseconds.date), name: $0["name"],
                scopes: KeyScopes(rawValue: $0["scopes"]).names)
        }
        let accounts = try Row.fetchAll(
            db, sql: "SELECT * FROM serviceAccount WHERE projectId = ? ORDER BY id", arguments: [rowID]
        ).map { ServiceAccountArchive(serviceAccount($0)) }
        let imported = try Row.fetchAll(
            db, sql: "SELECT secret, sealedFor FROM keyring WHERE projectId = ? ORDER BY id", arguments: [rowID]
        ).map { NotificationKeyring(secret: [UInt8]($0["secret"] as Data), sealedFor: $0["sealedFor"]) }
        return ProjectArchive(
            projectId: row["projectId"], senderId: row["senderId"], createdAt: EpochMilliseconds.date(row["createdAt"]),
            serverKeys: serverKeys, serviceAccounts: accounts,
            keyrings: ([ownKeyring(ownSecret, rowID)] + imported).map(KeyringArchive.init))
    }

    /// Tokens in id order (the order members are listed in, which an import into an empty
    /// database keeps), a step at a time along the rowid, each with its topics by name; tokens of
    /// projects not exported are skipped. The statements name their access paths, so that a
    /// database never analyzed (every imported one) is read the same way.
    private static func exportTokens(
        _ db: Database, projects: [Int64: String], to emit: (ArchiveRecord) throws -> Void
    ) throws {
        var after: Int64 = 0
        while true {
            let tokens = try Row.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT id, projectId, \(TokenInfo.sqliteColumns) FROM token NOT INDEXED
                        WHERE id > ? ORDER BY id LIMIT ?
                        """), arguments: [after, exportStep])
            guard let first = tokens.first, let last = tokens.last else { return }
            after = last["id"]
            guard tokens.contains(where: { projects[$0["projectId"]] != nil }) else { continue }
            var topics = [Int64: [Joined]]()
            let subscriptions = try Row.fetchCursor(
                db.cachedStatement(
                    sql: """
                        SELECT subscription.tokenId, topic.name, subscription.createdAt
                        FROM subscription INDEXED BY subscription_tokenId
                        CROSS JOIN topic ON topic.id = subscription.topicId
                        WHERE subscription.tokenId BETWEEN ? AND ?
                        """), arguments: [first["id"] as Int64, after])
            while let row = try subscriptions.next() {
                topics[row["tokenId"], default: []].append(Joined(name: row["name"], since: EpochMilliseconds.date(row["createdAt"])))
            }
            for token in tokens {
                guard let name = projects[token["projectId"]] else { continue }
                let info = TokenInfo(sqliteRow: token)
                try emit(
                    .token(
                        TokenArchive(
                            project: name, token: info.token, state: info.state, createdAt: info.createdAt,
                            updatedAt: info.updatedAt, topics: (topics[token["id"]] ?? []).sorted { $0.name < $1.name },
                            lastSeenAt: (token["lastSeenAt"] as Int64?).map(EpochMilliseconds.date),
                            attributes: info.attributes)))
            }
        }
    }

    /// Groups in id order, each with its members (in token-id order), its id under every keyring
    /// of the project and the keys it was imported with.
    private static func exportGroups(
        _ db: Database, project: Int64, named name: String, ownKeyring: NotificationKeyring,
        to emit: (ArchiveRecord) throws -> Void
    ) throws {
        let ownFingerprint = ownKeyring.fingerprint
        let groups = try Row.fetchCursor(
            db, sql: "SELECT id, name, createdAt, complete FROM deviceGroup WHERE projectId = ? ORDER BY id",
            arguments: [project])
        let members = try db.makeStatement(
            sql: """
                SELECT token.value, groupMember.addedAt FROM groupMember JOIN token ON token.id = groupMember.tokenId
                WHERE groupMember.groupId = ? ORDER BY groupMember.tokenId
                """)
        let keyringIDs = try db.makeStatement(
            sql: """
                SELECT keyring.secret, keyring.sealedFor, keyringGroup.sourceGroupId FROM keyringGroup
                JOIN keyring ON keyring.id = keyringGroup.keyringId
                WHERE keyringGroup.groupId = ? ORDER BY keyring.id, keyringGroup.sourceGroupId
                """)
        let importedKeys = try db.makeStatement(
            sql: "SELECT notificationKey FROM importedKey WHERE groupId = ? ORDER BY notificationKey")
        while let group = try groups.next() {
            let id: Int64 = group["id"]
            let foreign = try Row.fetchAll(keyringIDs, arguments: [id]).map {
                GroupArchive.KeyringID(
                    keyring: NotificationKeyring(secret: [UInt8]($0["secret"] as Data), sealedFor: $0["sealedFor"])
                        .fingerprint,
                    group: $0["sourceGroupId"])
            }
            try emit(
                .group(
                    GroupArchive(
                        project: name, name: group["name"], createdAt: EpochMilliseconds.date(group["createdAt"]),
                        members: try Row.fetchAll(members, arguments: [id]).map {
                            GroupArchive.Member(token: $0["value"], since: EpochMilliseconds.date($0["addedAt"]))
                        },
                        keyringIds: [GroupArchive.KeyringID(keyring: ownFingerprint, group: id)] + foreign,
                        notificationKeys: try String.fetchAll(importedKeys, arguments: [id]),
                        complete: group["complete"])))
        }
    }
}
