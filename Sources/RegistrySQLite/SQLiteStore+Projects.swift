import Foundation
import GRDB
import Registry

extension SQLiteStore {
    public func createProject(projectId: String, senderId: String, keyHash: [UInt8], audit: KeyAudit?) async throws
        -> Project
    {
        try await write { db, log in
            if try Bool.fetchOne(db, sql: "SELECT 1 FROM project WHERE projectId = ?", arguments: [projectId]) != nil {
                throw RegistryError.projectExists("a project with id \(projectId) already exists")
            }
            if try Bool.fetchOne(db, sql: "SELECT 1 FROM project WHERE senderId = ?", arguments: [senderId]) != nil {
                throw RegistryError.projectExists("a project with sender id \(senderId) already exists")
            }
            let now = EpochMilliseconds.now()
            try db.execute(
                sql: "INSERT INTO project (projectId, senderId, createdAt) VALUES (?, ?, ?)",
                arguments: [projectId, senderId, now])
            let project = Project(rowID: db.lastInsertedRowID, projectId: projectId, senderId: senderId)
            try db.execute(
                sql: "INSERT INTO serverKey (projectId, keyHash, createdAt) VALUES (?, ?, ?)",
                arguments: [project.rowID, Data(keyHash), now])
            let key = ServerKeyRecord(
                id: db.lastInsertedRowID, name: "", scopes: .all, createdAt: EpochMilliseconds.date(now))
            try Self.insertAudit(db, audit?(project.rowID, key, nil))
            return project
        }
    }

    public func addServerKey(
        keyHash: [UInt8], name: String, scopes: Int, toProject projectId: String, audit: @escaping KeyAudit
    ) async throws -> (Project, ServerKeyRecord) {
        try await write { db, log in
            guard let project = try Self.project(db, sql: "SELECT * FROM project WHERE projectId = ?", [projectId])
            else {
                throw RegistryError.projectNotFound(projectId)
            }
            let key = try Self.insertKey(
                db, NewServerKey(hash: keyHash, name: name, scopes: scopes), into: project.rowID)
            try Self.insertAudit(db, audit(project.rowID, key, nil))
            return (project, key)
        }
    }

    private static func insertKey(_ db: Database, _ key: NewServerKey, into projectRowID: Int64) throws
        -> ServerKeyRecord
    {
        let now = EpochMilliseconds.now()
        try db.execute(
            sql: "INSERT INTO serverKey (projectId, keyHash, createdAt, name, scopes) VALUES (?, ?, ?, ?, ?)",
            arguments: [projectRowID, Data(key.hash), now, key.name, key.scopes])
        return ServerKeyRecord(
            id: db.lastInsertedRowID, name: key.name, scopes: KeyScopes(rawValue: key.scopes),
            createdAt: EpochMilliseconds.date(now))
    }

    public func revokeServerKey(
        _ key: ServerKeyMatch, revokedAt: Date, replacement: NewServerKey?, audit: @escaping KeyAudit
    ) async throws -> (revoked: ServerKeyRecord, added: ServerKeyRecord?) {
        try await write { db, log in
            let at = EpochMilliseconds.milliseconds(revokedAt)
            let now = EpochMilliseconds.now()
            let row: Row?
            switch key {
            case .hash(let hash):
                row = try Row.fetchOne(
                    db, sql: "SELECT * FROM serverKey WHERE keyHash = ? AND (revokedAt IS NULL OR revokedAt > ?)",
                    arguments: [Data(hash), now])
            case .id(let id, let projectRowID):
                row = try Row.fetchOne(
                    db,
                    sql: """
                        SELECT * FROM serverKey WHERE id = ? AND projectId = ? AND (revokedAt IS NULL OR revokedAt > ?)
                        """,
                    arguments: [id, projectRowID, now])
            }
            guard let row else { throw RegistryError.serverKeyNotFound }
            let projectRowID: Int64 = row["projectId"]
            let added = try replacement.map { try Self.insertKey(db, $0, into: projectRowID) }
            // A grace period under way is shortened, never lengthened.
            try db.execute(
                sql: "UPDATE serverKey SET revokedAt = min(coalesce(revokedAt, ?), ?) WHERE id = ?",
                arguments: [at, at, row["id"] as Int64])
            let admins = try Int.fetchOne(
                db,
                sql: "SELECT count(*) FROM serverKey WHERE projectId = ? AND revokedAt IS NULL AND (scopes & 8) <> 0",
                arguments: [projectRowID])
            var revoked = Self.serverKey(row)
            revoked.revokedAt = min(revoked.revokedAt ?? revokedAt, revokedAt)
            // The entry before the last check: refused, it goes with the change.
            try Self.insertAudit(db, audit(projectRowID, revoked, added))
            if admins == 0 { throw RegistryError.lastAdminKey }
            return (revoked, added)
        }
    }

    public func serverKey(authenticatedBy keyHash: [UInt8], now: Date) async throws -> (Project, ServerKeyRecord)? {
        try await read { db in
            guard
                let row = try Row.fetchOne(
                    db.cachedStatement(
                        sql: """
                            SELECT serverKey.*, project.projectId AS projectName, project.senderId
                            FROM serverKey JOIN project ON project.id = serverKey.projectId
                            WHERE serverKey.keyHash = ? AND (serverKey.revokedAt IS NULL OR serverKey.revokedAt > ?)
                            """), arguments: [Data(keyHash), EpochMilliseconds.milliseconds(now)])
            else { return nil }
            return (
                Project(rowID: row["projectId"], projectId: row["projectName"], senderId: row["senderId"]),
                Self.serverKey(row)
            )
        }
    }

    public func serverKeys(in project: Project) async throws -> [ServerKeyRecord] {
        try await read { db in
            try Row.fetchAll(
                db, sql: "SELECT * FROM serverKey WHERE projectId = ? ORDER BY id", arguments: [project.rowID]
            ).map(Self.serverKey)
        }
    }

    public func recordKeyUse(ids: [Int64], at: Date) async throws {
        guard !ids.isEmpty else { return }
        try await write { db, _ in
            let at = EpochMilliseconds.milliseconds(at)
            for id in ids {
                try db.execute(
                    sql: "UPDATE serverKey SET lastUsedAt = ? WHERE id = ? AND (lastUsedAt IS NULL OR lastUsedAt < ?)",
                    arguments: [at, id, at])
            }
        }
    }

    static func serverKey(_ row: Row) -> ServerKeyRecord {
        ServerKeyRecord(
            id: row["id"], name: row["name"], scopes: KeyScopes(rawValue: row["scopes"]),
            createdAt: EpochMilliseconds.date(row["createdAt"]),
            lastUsedAt: (row["lastUsedAt"] as Int64?).map(EpochMilliseconds.date),
            revokedAt: (row["revokedAt"] as Int64?).map(EpochMilliseconds.date))
    }

    /// Reads a page of the file, so a file that cannot be read fails here.
    public func ping() async throws {
        _ = try await read { db in try Int.fetchOne(db, sql: "SELECT 1 FROM project LIMIT 1") }
    }

    public func projects() async throws -> [Project] {
        try await read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM project ORDER BY id").map(Self.project)
        }
    }

    public func secret(named name: String, orCreate make: @Sendable () -> [UInt8]) async throws -> [UInt8] {
        if let stored = try await read({ db in
            try Data.fetchOne(db, sql: "SELECT value FROM secret WHERE name = ?", arguments: [name])
        }) {
            return Array(stored)
        }
        let fresh = make()
        return try await write { db, log in
            try db.execute(
                sql: "INSERT OR IGNORE INTO secret (name, value) VALUES (?, ?)", arguments: [name, Data(fresh)])
            // Another process may have created it first; the stored one wins.
            return Array(try Data.fetchOne(db, sql: "SELECT value FROM secret WHERE name = ?", arguments: [name])!)
        }
    }

    private static func project(_ db: Database, sql: String, _ arguments: StatementArguments) throws -> Project? {
        try Row.fetchOne(db.cachedStatement(sql: sql), arguments: arguments).map(project)
    }

    private static func project(_ row: Row) -> Project {
        Project(rowID: row["id"], projectId: row["projectId"], senderId: row["senderId"])
    }
}

// MARK: - Service accounts

extension SQLiteStore {
    public func addServiceAccount(_ account: ServiceAccount, to project: Project) async throws {
        try await write { db, _ in
            try db.execute(
                sql: """
                    INSERT INTO serviceAccount (projectId, keyId, clientEmail, clientId, publicKey, tokenUri, createdAt, scopes)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    project.rowID, account.keyID, account.clientEmail, account.clientID, account.publicKey,
                    account.tokenURI, EpochMilliseconds.milliseconds(account.createdAt), account.scopes?.rawValue,
                ])
        }
    }

    public func serviceAccount(keyID: String) async throws -> (ServiceAccount, Project)? {
        try await activeServiceAccount(where: "serviceAccount.keyId = ?", keyID)
    }

    public func serviceAccount(clientEmail: String) async throws -> (ServiceAccount, Project)? {
        try await activeServiceAccount(where: "serviceAccount.clientEmail = ?", clientEmail)
    }

    /// The newest active account matching `condition` (one bound parameter), with its project.
    private func activeServiceAccount(where condition: String, _ value: String) async throws
        -> (ServiceAccount, Project)?
    {
        try await read { db in
            guard
                let row = try Row.fetchOne(
                    db,
                    sql: """
                        SELECT serviceAccount.*, project.projectId AS projectName, project.senderId
                        FROM serviceAccount JOIN project ON project.id = serviceAccount.projectId
                        WHERE \(condition) AND serviceAccount.revokedAt IS NULL
                        ORDER BY serviceAccount.id DESC LIMIT 1
                        """, arguments: [value])
            else { return nil }
            return (
                Self.serviceAccount(row),
                Project(rowID: row["projectId"], projectId: row["projectName"], senderId: row["senderId"])
            )
        }
    }

    public func serviceAccounts(in project: Project) async throws -> [ServiceAccount] {
        try await read { db in
            try Row.fetchAll(
                db, sql: "SELECT * FROM serviceAccount WHERE projectId = ? ORDER BY id", arguments: [project.rowID]
            ).map(Self.serviceAccount)
        }
    }

    public func markAssertionUsed(hash: [UInt8], expiresAt: Date, now: Date) async throws -> Date {
        try await write { db, _ in
            try db.execute(sql: "DELETE FROM usedAssertion WHERE expiresAt < ?", arguments: [EpochMilliseconds.milliseconds(now)])
            try db.execute(
                sql: "INSERT OR IGNORE INTO usedAssertion (hash, firstUsedAt, expiresAt) VALUES (?, ?, ?)",
                arguments: [Data(hash), EpochMilliseconds.milliseconds(now), EpochMilliseconds.milliseconds(expiresAt)])
            let first = try Int64.fetchOne(
                db, sql: "SELECT firstUsedAt FROM usedAssertion WHERE hash = ?", arguments: [Data(hash)])
            return EpochMilliseconds.date(first ?? EpochMilliseconds.milliseconds(now))
        }
    }

    public func revokeServiceAccount(keyID: String) async throws {
        try await write { db, _ in
            try db.execute(
                sql: "UPDATE serviceAccount SET revokedAt = ? WHERE keyId = ? AND revokedAt IS NULL",
                arguments: [EpochMilliseconds.now(), keyID])
            guard db.changesCount > 0 else { throw RegistryError.serviceAccountNotFound }
        }
    }

    static func serviceAccount(_ row: Row) -> ServiceAccount {
        ServiceAccount(
            keyID: row["keyId"], clientEmail: row["clientEmail"], clientID: row["clientId"],
            publicKey: row["publicKey"], tokenURI: row["tokenUri"],
            createdAt: EpochMilliseconds.date(row["createdAt"]),
            revokedAt: (row["revokedAt"] as Int64?).map(EpochMilliseconds.date),
            scopes: (row["scopes"] as Int?).map(KeyScopes.init(rawValue:)))
    }
}
