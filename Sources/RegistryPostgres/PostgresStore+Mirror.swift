import PostgresNIO
import Registry

/// The mirror of Google's device groups (`project mirror`): its settings, and how complete the
/// project's groups are (the `mirror` table and `"deviceGroup".complete` of migration v3).
extension PostgresStore {
    public func mirrorSettings(of project: Project) async throws -> RelaySettings? {
        try await database.withConnection { connection in
            try await connection.first(
                #"""
                SELECT "firebaseProjectId", "clientEmail", "privateKeyId", "privateKey", "tokenUri", upstream
                FROM mirror WHERE "projectId" = \#(project.rowID)
                """#, as: (String, String, String?, String, String, String).self
            ).map { firebase, email, keyID, key, tokenURI, upstream in
                RelaySettings(
                    firebaseProjectID: firebase, clientEmail: email, privateKeyID: keyID, privateKey: key,
                    tokenURI: tokenURI, upstream: upstream)
            }
        }
    }

    public func setMirrorSettings(_ settings: RelaySettings?, for project: Project) async throws {
        guard let settings else {
            return try await transaction { connection in
                try await connection.run(#"DELETE FROM mirror WHERE "projectId" = \#(project.rowID)"#)
            }
        }
        let now = EpochMilliseconds.now()
        try await transaction { connection in
            try await connection.run(
                #"""
                INSERT INTO mirror ("projectId", "firebaseProjectId", "clientEmail", "privateKeyId", "privateKey", "tokenUri", upstream, "createdAt")
                VALUES (\#(project.rowID), \#(settings.firebaseProjectID), \#(settings.clientEmail), \#(settings.privateKeyID),
                        \#(settings.privateKey), \#(settings.tokenURI), \#(settings.upstream), \#(now))
                ON CONFLICT ("projectId") DO UPDATE SET
                  "firebaseProjectId" = excluded."firebaseProjectId", "clientEmail" = excluded."clientEmail",
                  "privateKeyId" = excluded."privateKeyId", "privateKey" = excluded."privateKey",
                  "tokenUri" = excluded."tokenUri", upstream = excluded.upstream
                """#)
        }
    }

    public func isGroupComplete(_ id: Int64, in project: Project) async throws -> Bool {
        try await database.withConnection { connection in
            try await connection.first(
                #"SELECT complete FROM "deviceGroup" WHERE id = \#(id) AND "projectId" = \#(project.rowID)"#,
                as: Bool.self) ?? true
        }
    }

    public func groupCompleteness(in project: Project) async throws -> GroupCompleteness {
        try await database.withConnection { connection in
            let counts = try await connection.first(
                #"""
                SELECT COUNT(*) FILTER (WHERE complete)::bigint, COUNT(*) FILTER (WHERE NOT complete)::bigint,
                  (SELECT COUNT(*) FROM "groupMember" JOIN "deviceGroup" g ON g.id = "groupMember"."groupId"
                   WHERE g."projectId" = \#(project.rowID) AND NOT g.complete)::bigint
                FROM "deviceGroup" WHERE "projectId" = \#(project.rowID)
                """#, as: (Int64, Int64, Int64).self)
            return GroupCompleteness(
                complete: Int(counts?.0 ?? 0), incomplete: Int(counts?.1 ?? 0), membersLearned: Int(counts?.2 ?? 0))
        }
    }
}
