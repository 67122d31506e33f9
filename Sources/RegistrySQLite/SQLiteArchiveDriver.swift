import Foundation
import GRDB
import Registry

/// The import's statements on SQLite, inside the write of one batch (the rules are
/// `ArchiveMerge`'s). Every call runs at once on the writer's thread: the statements are cached,
/// and a statement over many tokens is a loop over one of them.
struct SQLiteArchiveDriver: ArchiveMergeDriver {
    let db: Database

    // MARK: - Projects and credentials

    func project(_ projectId: String) throws -> (rowID: Int64, senderId: String)? {
        try Row.fetchOne(db, sql: "SELECT id, senderId FROM project WHERE projectId = ?", arguments: [projectId])
            .map { ($0["id"], $0["senderId"]) }
    }

    func project(sendingAs senderId: String) throws -> String? {
        try String.fetchOne(db, sql: "SELECT projectId FROM project WHERE senderId = ?", arguments: [senderId])
    }

    func insertProject(_ record: ProjectArchive) throws -> Int64 {
        try db.execute(
            sql: "INSERT INTO project (projectId, senderId, createdAt) VALUES (?, ?, ?)",
            arguments: [record.projectId, record.senderId, EpochMilliseconds.milliseconds(record.createdAt)])
        return db.lastInsertedRowID
    }

    func serverKey(_ hash: [UInt8]) throws -> CredentialRow? {
        try Row.fetchOne(
            db, sql: "SELECT projectId, revokedAt FROM serverKey WHERE keyHash = ?", arguments: [Data(hash)]
        )
        .map { CredentialRow(project: $0["projectId"], revokedAt: $0["revokedAt"]) }
    }

    func insertServerKey(
        _ hash: [UInt8], createdAt: Int64, revokedAt: Int64?, name: String, scopes: Int, of project: Int64
    ) throws {
        try db.execute(
            sql: "INSERT INTO serverKey (projectId, keyHash, createdAt, revokedAt, name, scopes) VALUES (?, ?, ?, ?, ?, ?)",
            arguments: [project, Data(hash), createdAt, revokedAt, name, scopes])
    }

    func revokeServerKey(_ hash: [UInt8], at revokedAt: Int64) throws {
        try db.execute(sql: "UPDATE serverKey SET revokedAt = ? WHERE keyHash = ?", arguments: [revokedAt, Data(hash)])
    }

    func serviceAccount(_ keyId: String) throws -> CredentialRow? {
        try Row.fetchOne(db, sql: "SELECT projectId, revokedAt FROM serviceAccount WHERE keyId = ?", arguments: [keyId])
            .map { CredentialRow(project: $0["projectId"], revokedAt: $0["revokedAt"]) }
    }

    func insertServiceAccount(_ account: ServiceAccountArchive, revokedAt: Int64?, of project: Int64) throws {
        try db.execute(
            sql: """
                INSERT INTO serviceAccount
                  (projectId, keyId, clientEmail, clientId, publicKey, tokenUri, createdAt, revokedAt, scopes)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                project, account.keyId, account.clientEmail, account.clientId, account.publicKey, account.tokenUri,
                EpochMilliseconds.milliseconds(account.createdAt), revokedAt, try account.scopeBits(),
            ])
    }

    func revokeServiceAccount(_ keyId: String, at revokedAt: Int64) throws {
        try db.execute(sql: "UPDATE serviceAccount SET revokedAt = ? WHERE keyId = ?", arguments: [revokedAt, keyId])
    }

    func insertKeyring(
        _ fingerprint: String, secret: [UInt8], sealedFor: Int64, of project: Int64, at importedAt: Int64
    ) throws -> Bool {
        try db.execute(
            sql: """
                INSERT INTO keyring (projectId, fingerprint, secret, sealedFor, importedAt) VALUES (?, ?, ?, ?, ?)
                ON CONFLICT (projectId, fingerprint) DO NOTHING
                """,
            arguments: [project, fingerprint, Data(secret), sealedFor, importedAt])
        return db.changesCount > 0
    }

    func keyringCount(of project: Int64) throws -> Int {
        try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM keyring WHERE projectId = ?", arguments: [project]) ?? 0
    }

    func keyring(_ fingerprint: String, of project: Int64) throws -> Int64? {
        try Int64.fetchOne(
            db.cachedStatement(sql: "SELECT id FROM keyring WHERE projectId = ? AND fingerprint = ?"),
            arguments: [project, fingerprint])
    }

    // MARK: - Topics and tokens

    func topic(_ name: String, in project: Int64, createdAt: Int64) throws -> (id: Int64, created: Bool) {
        try db.cachedStatement(
            sql:
                "INSERT INTO topic (projectId, name, createdAt) VALUES (?, ?, ?) ON CONFLICT (projectId, name) DO NOTHING"
        ).execute(arguments: [project, name, createdAt])
        if db.changesCount > 0 { return (db.lastInsertedRowID, true) }
        let id = try Int64.fetchOne(
            db.cachedStatement(sql: "SELECT id FROM topic WHERE projectId = ? AND name = ?"),
            arguments: [project, name])
        return (id!, false)
    }

    func insertTokens(_ tokens: [NewToken], in project: Int64) throws -> [String: TokenRowState] {
        let insert = try db.cachedStatement(
            sql: """
                INSERT INTO token (projectId, value, state, createdAt, updatedAt, lastSeenAt, platform, locale,
                  timeZone, appVersion)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                ON CONFLICT (projectId, value) DO NOTHING
                """)
        var inserted: [String: TokenRowState] = [:]
        for token in tokens {
            let attributes = token.attributes
            try insert.execute(arguments: [
                project, token.value, token.state.rawValue, token.createdAt, token.updatedAt, token.lastSeenAt,
                attributes.platform?.rawValue, attributes.locale, attributes.timeZone, attributes.appVersion,
            ])
            if db.changesCount > 0 {
                inserted[token.value] = TokenRowState(
                    id: db.lastInsertedRowID, state: token.state, updatedAt: token.updatedAt)
            }
        }
        return inserted
    }

    func tokens(_ values: [String], in project: Int64) throws -> [String: TokenRowState] {
        let select = try db.cachedStatement(
            sql: "SELECT id, state, updatedAt FROM token WHERE projectId = ? AND value = ?")
        var found: [String: TokenRowState] = [:]
        for value in values {
            guard let row = try Row.fetchOne(select, arguments: [project, value]) else { continue }
            found[value] = TokenRowState(
                id: row["id"], state: TokenState(rawValue: row["state"]) ?? .registered, updatedAt: row["updatedAt"])
        }
        return found
    }

    func reregister(_ token: Int64, at updatedAt: Int64) throws {
        try db.cachedStatement(sql: "UPDATE token SET state = 'registered', updatedAt = ? WHERE id = ?")
            .execute(arguments: [updatedAt, token])
    }

    func subscribe(_ subscriptions: [NewSubscription]) throws -> [(topic: Int64, token: Int64)] {
        let insert = try db.cachedStatement(
            sql: "INSERT INTO subscription (topicId, tokenId, createdAt) VALUES (?, ?, ?) ON CONFLICT DO NOTHING")
        var added: [(topic: Int64, token: Int64)] = []
        for row in subscriptions {
            try insert.execute(arguments: [row.topic, row.token, row.since])
            if db.changesCount > 0 { added.append((row.topic, row.token)) }
        }
        return added
    }

    func tokens(_ ids: [Int64], withMoreTopicsThan limit: Int) throws -> [Int64] {
        let count = try db.cachedStatement(sql: "SELECT COUNT(*) FROM subscription WHERE tokenId = ?")
        return try ids.filter { try Int.fetchOne(count, arguments: [$0]) ?? 0 > limit }
    }

    // MARK: - Groups and notification keys

    func group(_ name: String, in project: Int64) throws -> Int64? {
        try Int64.fetchOne(
            db.cachedStatement(sql: "SELECT id FROM deviceGroup WHERE projectId = ? AND name = ?"),
            arguments: [project, name])
    }

    func insertGroup(_ name: String, createdAt: Int64, complete: Bool, in project: Int64) throws -> Int64 {
        try db.cachedStatement(
            sql: "INSERT INTO deviceGroup (projectId, name, createdAt, complete) VALUES (?, ?, ?, ?)"
        )
        .execute(arguments: [project, name, createdAt, complete])
        return db.lastInsertedRowID
    }

    func markIncomplete(_ group: Int64) throws {
        try db.cachedStatement(sql: "UPDATE deviceGroup SET complete = 0 WHERE id = ?").execute(arguments: [group])
    }

    func addMembers(_ members: [(token: Int64, since: Int64)], to group: Int64) throws -> Int {
        let join = try db.cachedStatement(
            sql: "INSERT INTO groupMember (groupId, tokenId, addedAt) VALUES (?, ?, ?) ON CONFLICT DO NOTHING")
        var added = 0
        for member in members {
            try join.execute(arguments: [group, member.token, member.since])
            added += db.changesCount
        }
        return added
    }

    func memberCount(of group: Int64) throws -> Int { try SQLiteRowStatements.memberCount(of: group, db) }
    func deleteGroup(_ group: Int64) throws { try SQLiteRowStatements.deleteGroup(group, db) }

    func mapKeyring(_ keyring: Int64, sourceGroup: Int64, to group: Int64) throws {
        try db.cachedStatement(
            sql: """
                INSERT INTO keyringGroup (keyringId, sourceGroupId, groupId) VALUES (?, ?, ?)
                ON CONFLICT (keyringId, sourceGroupId) DO UPDATE SET groupId = excluded.groupId
                """
        ).execute(arguments: [keyring, sourceGroup, group])
    }

    func keepImportedKey(_ key: String, naming group: Int64, in project: Int64, at importedAt: Int64) throws -> Bool {
        try db.cachedStatement(
            sql: """
                INSERT INTO importedKey (projectId, notificationKey, groupId, importedAt) VALUES (?, ?, ?, ?)
                ON CONFLICT (projectId, notificationKey) DO UPDATE SET groupId = excluded.groupId
                WHERE importedKey.groupId IS NULL
                """
        ).execute(arguments: [project, key, group, importedAt])
        return db.changesCount > 0
    }

    func groupNamed(byImportedKey key: String, in project: Int64) throws -> (id: Int64, name: String)? {
        try Row.fetchOne(
            db.cachedStatement(
                sql: """
                    SELECT deviceGroup.id, deviceGroup.name FROM importedKey
                    JOIN deviceGroup ON deviceGroup.id = importedKey.groupId
                    WHERE importedKey.projectId = ? AND importedKey.notificationKey = ?
                    """), arguments: [project, key]
        ).map { ($0["id"], $0["name"]) }
    }

    // MARK: - Errors

    func conflict(in error: any Error) -> String? {
        guard let error = error as? DatabaseError, error.resultCode == .SQLITE_CONSTRAINT else { return nil }
        return error.message ?? ""
    }
}
