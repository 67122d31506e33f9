import Foundation
import PostgresNIO
import Registry

/// Projects, server keys, service accounts, used assertions and the server's secrets.
extension PostgresStore {
    public func createProject(projectId: String, senderId: String, keyHash: [UInt8]) async throws -> Project {
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
            try await connection.run(
                #"INSERT INTO "serverKey" ("projectId", "keyHash", "createdAt") VALUES (\#(id), \#(Data(keyHash)), \#(now))"#)
            return Project(rowID: id, projectId: projectId, senderId: senderId)
        } onUniqueViolation: {
            // Another server created the same project between the checks and the insert.
            RegistryError.projectExists("a project with id \(projectId) or sender id \(senderId) already exists")
        }
    }

    public func addServerKey(keyHash: [UInt8], toProject projectId: String) async throws -> Project {
        try await transaction { connection in
            guard let project = try await Self.project(connection, #"SELECT id, "projectId", "senderId" FROM project WHERE "projectId" = \#(projectId)"#)
            else { throw RegistryError.projectNotFound(projectId) }
            try await connection.run(
                #"INSERT INTO "serverKey" ("projectId", "keyHash", "createdAt") VALUES (\#(project.rowID), \#(Data(keyHash)), \#(EpochMilliseconds.now()))"#)
            return project
        }
    }

    public func revokeServerKey(keyHash: [UInt8]) async throws {
        try await transaction { connection in
            let revoked = try await connection.count(
                #"UPDATE "serverKey" SET "revokedAt" = \#(EpochMilliseconds.now()) WHERE "keyHash" = \#(Data(keyHash)) AND "revokedAt" IS NULL RETURNING 1"#)
            if revoked == 0 { throw RegistryError.serverKeyNotFound }
        }
    }

    public func project(authenticatedBy keyHash: [UInt8]) async throws -> Project? {
        try await database.withConnection { connection in
            try await Self.project(
                connection,
                #"""
                SELECT project.id, project."projectId", project."senderId"
                FROM "serverKey" JOIN project ON project.id = "serverKey"."projectId"
                WHERE "serverKey"."keyHash" = \#(Data(keyHash)) AND "serverKey"."revokedAt" IS NULL
                """#)
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
                INSERT INTO "serviceAccount" ("projectId", "keyId", "clientEmail", "clientId", "publicKey", "tokenUri", "createdAt")
                VALUES (\#(project.rowID), \#(account.keyID), \#(account.clientEmail), \#(account.clientID),
                        \#(account.publicKey), \#(account.tokenURI), \#(EpochMilliseconds.milliseconds(account.createdAt)))
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
                let (keyID, email, clientID, key, uri, created, revoked, id, projectId, senderId) = try row.decode(
                    (String, String, String, String, String?, Int64, Int64?, Int64, String, String).self)
                return (
                    Self.serviceAccount(keyID, email, clientID, key, uri, created, revoked),
                    Project(rowID: id, projectId: projectId, senderId: senderId)
                )
            }
            return nil
        }
    }

    public func serviceAccounts(in project: Project) async throws -> [ServiceAccount] {
        try await database.withConnection { connection in
            var accounts: [ServiceAccount] = []
            for try await (keyID, email, clientID, key, uri, created, revoked) in try await connection.query(
                #"SELECT \#(unescaped: Self.accountColumns) FROM "serviceAccount" WHERE "projectId" = \#(project.rowID) ORDER BY id"#,
                logger: logger
            ).decode((String, String, String, String, String?, Int64, Int64?).self) {
                accounts.append(Self.serviceAccount(keyID, email, clientID, key, uri, created, revoked))
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
        #""serviceAccount"."keyId", "serviceAccount"."clientEmail", "serviceAccount"."clientId", "serviceAccount"."publicKey", "serviceAccount"."tokenUri", "serviceAccount"."createdAt", "serviceAccount"."revokedAt""#

    static func serviceAccount(
        _ keyID: String, _ email: String, _ clientID: String, _ key: String, _ uri: String?, _ created: Int64,
        _ revoked: Int64?
    ) -> ServiceAccount {
        ServiceAccount(
            keyID: keyID, clientEmail: email, clientID: clientID, publicKey: key, tokenURI: uri,
            createdAt: EpochMilliseconds.date(created), revokedAt: revoked.map(EpochMilliseconds.date))
    }
}
