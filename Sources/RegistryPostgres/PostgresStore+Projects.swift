import Foundation
import Logging
import PostgresNIO
import Registry

/// Projects, server keys, service accounts, used assertions and the server's secrets.
extension PostgresStore {
    public func createProject(projectId: String, senderId: String, keyHash: [UInt8], audit: KeyAudit?) async throws
        -> Project
    {
        try await transaction { connection in
            if try await connection.exists(#"SELECT 1 FROM project WHERE "projectId" = \#(projectId)"#) {
                throw RegistryError.projectExists("a project with id \(projectId) already exists")
            }
            if try await connection.exists(#"SELECT 1 FROM project WHERE "senderId" = \#(senderId)"#) {
                throw RegistryError.projectExists("a project with sender id \(senderId) already exists")
            }
            let now = EpochMilliseconds.now()
            let id = try await connection.one(
                #"INSERT INTO project ("projectId", "senderId", "createdAt") VALUES (\#(projectId), \#(senderId), \#(now)) RETURNING id"#,
                as: Int64.self)
            let keyID = try await connection.one(
                #"INSERT INTO "serverKey" ("projectId", "keyHash", "createdAt") VALUES (\#(id), \#(Data(keyHash)), \#(now)) RETURNING id"#,
                as: Int64.self)
            let key = ServerKeyRecord(id: keyID, name: "", scopes: .all, createdAt: EpochMilliseconds.date(now))
            try await Self.insertAudit(connection, audit?(id, key, nil))
            return Project(rowID: id, projectId: projectId, senderId: senderId)
        } onUniqueViolation: {
            // Another server created the same project between the checks and the insert.
            RegistryError.projectExists("a project with id \(projectId) or sender id \(senderId) already exists")
        }
    }

    public func addServerKey(
        keyHash: [UInt8], name: String, scopes: Int, toProject projectId: String, audit: @escaping KeyAudit
    ) async throws -> (Project, ServerKeyRecord) {
        try await transaction { connection in
            guard let project = try await Self.project(connection, #"SELECT id, "projectId", "senderId" FROM project WHERE "projectId" = \#(projectId)"#)
            else { throw RegistryError.projectNotFound(projectId) }
            let key = try await Self.insertKey(
                connection, NewServerKey(hash: keyHash, name: name, scopes: scopes), into: project.rowID)
            try await Self.insertAudit(connection, audit(project.rowID, key, nil))
            return (project, key)
        }
    }

    private static func insertKey(_ connection: PostgresConnection, _ key: NewServerKey, into projectRowID: Int64)
        async throws -> ServerKeyRecord
    {
        let now = EpochMilliseconds.now()
        let id = try await connection.one(
            #"INSERT INTO "serverKey" ("projectId", "keyHash", "createdAt", name, scopes) VALUES (\#(projectRowID), \#(Data(key.hash)), \#(now), \#(key.name), \#(key.scopes)) RETURNING id"#,
            as: Int64.self)
        return ServerKeyRecord(
            id: id, name: key.name, scopes: KeyScopes(rawValue: key.scopes), createdAt: EpochMilliseconds.date(now))
    }

    /// The columns `serverKey(_:)` reads, in its order, after the project's three.
    private static let keyColumns =
        #"project.id, project."projectId", project."senderId", "serverKey".id, "serverKey".name, "serverKey".scopes, "serverKey"."createdAt", "serverKey"."lastUsedAt", "serverKey"."revokedAt""#
    private typealias KeyRow = (Int64, String, String, Int64, String, Int, Int64, Int64?, Int64?)

    private static func keys(_ connection: PostgresConnection, _ query: PostgresQuery, logger: Logger) async throws
        -> [(Project, ServerKeyRecord)]
    {
        var found: [(Project, ServerKeyRecord)] = []
        for try await row in try await connection.query(query, logger: logger).decode(KeyRow.self) {
            found.append(
                (
                    Project(rowID: row.0, projectId: row.1, senderId: row.2),
                    ServerKeyRecord(
                        id: row.3, name: row.4, scopes: KeyScopes(rawValue: row.5),
                        createdAt: EpochMilliseconds.date(row.6), lastUsedAt: row.7.map(EpochMilliseconds.date),
                        revokedAt: row.8.map(EpochMilliseconds.date))
                ))
        }
        return found
    }

    public func revokeServerKey(
        _ key: ServerKeyMatch, revokedAt: Date, replacement: NewServerKey?, audit: @escaping KeyAudit
    ) async throws -> (revoked: ServerKeyRecord, added: ServerKeyRecord?) {
        let logger = logger
        return try await transaction { connection in
            let at = EpochMilliseconds.milliseconds(revokedAt)
            let now = EpochMilliseconds.now()
            let query: PostgresQuery
            switch key {
            case .hash(let hash):
                query = try #"""
                SELECT \#(unescaped: Self.keyColumns) FROM "serverKey" JOIN project ON project.id = "serverKey"."projectId"
                WHERE "serverKey"."keyHash" = \#(Data(hash)) AND ("serverKey"."revokedAt" IS NULL OR "serverKey"."revokedAt" > \#(now))
                FOR UPDATE OF project
                """#
            case .id(let id, let projectRowID):
                query = #"""
                    SELECT \#(unescaped: Self.keyColumns) FROM "serverKey" JOIN project ON project.id = "serverKey"."projectId"
                    WHERE "serverKey".id = \#(id) AND "serverKey"."projectId" = \#(projectRowID)
                      AND ("serverKey"."revokedAt" IS NULL OR "serverKey"."revokedAt" > \#(now))
                    FOR UPDATE OF project
                    """#
            }
            guard let (project, found) = try await Self.keys(connection, query, logger: logger).first else {
                throw RegistryError.serverKeyNotFound
            }
            var added: ServerKeyRecord?
            if let replacement { added = try await Self.insertKey(connection, replacement, into: project.rowID) }
            // A grace period under way is shortened, never lengthened.
            try await connection.run(
                #"UPDATE "serverKey" SET "revokedAt" = LEAST(COALESCE("revokedAt", \#(at)), \#(at)) WHERE id = \#(found.id)"#)
            let admins = try await connection.one(
                #"SELECT count(*) FROM "serverKey" WHERE "projectId" = \#(project.rowID) AND "revokedAt" IS NULL AND (scopes & 8) <> 0"#,
                as: Int64.self)
            var revoked = found
            revoked.revokedAt = min(found.revokedAt ?? revokedAt, revokedAt)
            // The entry before the last check: refused, it goes with the change.
            try await Self.insertAudit(connection, audit(project.rowID, revoked, added))
            if admins == 0 { throw RegistryError.lastAdminKey }
            return (revoked, added)
        }
    }

    public func serverKey(authenticatedBy keyHash: [UInt8], now: Date) async throws -> (Project, ServerKeyRecord)? {
        let logger = logger
        return try await database.withConnection { connection in
            try await Self.keys(
                connection,
                #"""
                SELECT \#(unescaped: Self.keyColumns) FROM "serverKey" JOIN project ON project.id = "serverKey"."projectId"
                WHERE "serverKey"."keyHash" = \#(Data(keyHash))
                  AND ("serverKey"."revokedAt" IS NULL OR "serverKey"."revokedAt" > \#(EpochMilliseconds.milliseconds(now)))
                """#, logger: logger
            ).first
        }
    }

    public func serverKeys(in project: Project) async throws -> [ServerKeyRecord] {
        let logger = logger
        return try await database.withConnection { connection in
            try await Self.keys(
                connection,
                #"""
                SELECT \#(unescaped: Self.keyColumns) FROM "serverKey" JOIN project ON project.id = "serverKey"."projectId"
                WHERE "serverKey"."projectId" = \#(project.rowID) ORDER BY "serverKey".id
                """#, logger: logger
            ).map(\.1)
        }
    }

    public func recordKeyUse(ids: [Int64], at: Date) async throws {
        guard !ids.isEmpty else { return }
        let at = EpochMilliseconds.milliseconds(at)
        try await transaction { connection in
            for id in ids.sorted() {
                try await connection.run(
                    #"UPDATE "serverKey" SET "lastUsedAt" = \#(at) WHERE id = \#(id) AND ("lastUsedAt" IS NULL OR "lastUsedAt" < \#(at))"#)
            }
        }
    }

    public func projects() async throws -> [Project] {
        try await database.withConnection { connection in
            var projects: [Project] = []
            for try await (id, projectId, senderId) in try await connection.query(
                #"SELECT id, "projectId", "senderId" FROM project ORDER BY id"#, logger: logger
            ).decode((Int64, String, String).self) {
                projects.append(Project(rowID: id, projectId: projectId, senderId: senderId))
            }
            return projects
        }
    }

    public func secret(named name: String, orCreate make: @Sendable () -> [UInt8]) async throws -> [UInt8] {
        let fresh = Data(make())
        return try await transaction { connection in
            // Another server may create it first; the stored one wins.
            try await connection.run(#"INSERT INTO secret (name, value) VALUES (\#(name), \#(fresh)) ON CONFLICT (name) DO NOTHING"#)
            return Array(try await connection.one(#"SELECT value FROM secret WHERE name = \#(name)"#, as: Data.self))
        }
    }

    private static func project(_ connection: PostgresConnection, _ query: PostgresQuery) async throws -> Project? {
        for try await (id, projectId, senderId) in try await connection.query(query, logger: .silent).decode(
            (Int64, String, String).self)
        {
            return Project(rowID: id, projectId: projectId, senderId: senderId)
        }
        return nil
    }
}

// MARK: - Service accounts

extension PostgresStore {
    public func addServiceAccount(_ account: ServiceAccount, to project: Project) async throws {
        try await transaction { connection in
            try await connection.run(
                #"""
                INSERT INTO "serviceAccount" ("projectId", "keyId", "clientEmail", "clientId", "publicKey", "tokenUri", "createdAt", scopes)
                VALUES (\#(project.rowID), \#(account.keyID), \#(account.clientEmail), \#(account.clientID),
                        \#(account.publicKey), \#(account.tokenURI), \#(EpochMilliseconds.milliseconds(account.createdAt)),
                        \#(account.scopes?.rawValue))
                """#)
        }
    }

    public func serviceAccount(keyID: String) async throws -> (ServiceAccount, Project)? {
        try await activeServiceAccount(#"""
            SELECT \#(unescaped: Self.accountColumns), project.id, project."projectId", project."senderId"
            FROM "serviceAccount" JOIN project ON project.id = "serviceAccount"."projectId"
            WHERE "serviceAccount"."keyId" = \#(keyID) AND "serviceAccount"."revokedAt" IS NULL
            ORDER BY "serviceAccount".id DESC LIMIT 1
            """#)
    }

    public func serviceAccount(clientEmail: String) async throws -> (ServiceAccount, Project)? {
        try await activeServiceAccount(#"""
            SELECT \#(unescaped: Self.accountColumns), project.id, project."projectId", project."senderId"
            FROM "serviceAccount" JOIN project ON project.id = "serviceAccount"."projectId"
            WHERE "serviceAccount"."clientEmail" = \#(clientEmail) AND "serviceAccount"."revokedAt" IS NULL
            ORDER BY "serviceAccount".id DESC LIMIT 1
            """#)
    }

    /// The newest active account the query finds, with its project.
    private func activeServiceAccount(_ query: PostgresQuery) async throws -> (ServiceAccount, Project)? {
        try await database.withConnection { connection in
            for try await row in try await connection.query(query, logger: logger) {
                let (keyID, email, clientID, key, uri, created, revoked, scopes, id, projectId, senderId) = try row.decode(
                    (String, String, String, String, String?, Int64, Int64?, Int?, Int64, String, String).self)
                return (
                    Self.serviceAccount(keyID, email, clientID, key, uri, created, revoked, scopes),
                    Project(rowID: id, projectId: projectId, senderId: senderId)
                )
            }
            return nil
        }
    }

    public func serviceAccounts(in project: Project) async throws -> [ServiceAccount] {
        try await database.withConnection { connection in
            var accounts: [ServiceAccount] = []
            for try await (keyID, email, clientID, key, uri, created, revoked, scopes) in try await connection.query(
                #"SELECT \#(unescaped: Self.accountColumns) FROM "serviceAccount" WHERE "projectId" = \#(project.rowID) ORDER BY id"#,
                logger: logger
            ).decode((String, String, String, String, String?, Int64, Int64?, Int?).self) {
                accounts.append(Self.serviceAccount(keyID, email, clientID, key, uri, created, revoked, scopes))
            }
            return accounts
        }
    }

    public func markAssertionUsed(hash: [UInt8], expiresAt: Date, now: Date) async throws -> Date {
        let now = EpochMilliseconds.milliseconds(now)
        return try await transaction { connection in
            try await connection.run(#"DELETE FROM "usedAssertion" WHERE "expiresAt" < \#(now)"#)
            try await connection.run(
                #"""
                INSERT INTO "usedAssertion" (hash, "firstUsedAt", "expiresAt")
                VALUES (\#(Data(hash)), \#(now), \#(EpochMilliseconds.milliseconds(expiresAt)))
                ON CONFLICT (hash) DO NOTHING
                """#)
            return EpochMilliseconds.date(
                try await connection.one(#"SELECT "firstUsedAt" FROM "usedAssertion" WHERE hash = \#(Data(hash))"#, as: Int64.self))
        }
    }

    public func revokeServiceAccount(keyID: String) async throws {
        try await transaction { connection in
            let revoked = try await connection.count(
                #"UPDATE "serviceAccount" SET "revokedAt" = \#(EpochMilliseconds.now()) WHERE "keyId" = \#(keyID) AND "revokedAt" IS NULL RETURNING 1"#)
            guard revoked > 0 else { throw RegistryError.serviceAccountNotFound }
        }
    }

    /// The columns `serviceAccount(_:…)` reads, in its order.
    static let accountColumns =
        #""serviceAccount"."keyId", "serviceAccount"."clientEmail", "serviceAccount"."clientId", "serviceAccount"."publicKey", "serviceAccount"."tokenUri", "serviceAccount"."createdAt", "serviceAccount"."revokedAt", "serviceAccount".scopes"#

    static func serviceAccount(
        _ keyID: String, _ email: String, _ clientID: String, _ key: String, _ uri: String?, _ created: Int64,
        _ revoked: Int64?, _ scopes: Int?
    ) -> ServiceAccount {
        ServiceAccount(
            keyID: keyID, clientEmail: email, clientID: clientID, publicKey: key, tokenURI: uri,
            createdAt: EpochMilliseconds.date(created), revokedAt: revoked.map(EpochMilliseconds.date),
            scopes: scopes.map(KeyScopes.init(rawValue:)))
    }
}
