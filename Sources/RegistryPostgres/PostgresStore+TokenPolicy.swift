import Foundation
import PostgresNIO
import Registry

/// Each project's token policy and the expiry sweep's statements (migration v17-token-policy): the
/// rules are `TokenPolicy`'s and `TokenExpirySweep`'s.
extension PostgresStore {
    public func tokenPolicy(of project: Project) async throws -> TokenPolicy {
        try await database.withConnection { connection in
            guard
                let (stale, expire, sendToStale) = try await connection.first(
                    #"""
                    SELECT "tokenStaleAfter", "tokenExpireAfter", "tokenSendToStale" FROM project WHERE id = \#(project.rowID)
                    """#, as: (Int64, Int64?, Bool).self)
            else { return .standard }
            return TokenPolicy(
                staleAfter: .seconds(stale), expireAfter: expire.map { .seconds($0) }, sendToStale: sendToStale)
        }
    }

    public func setTokenPolicy(_ policy: TokenPolicy, for project: Project, audit: AuditWrite?) async throws {
        let stale = policy.staleAfter.components.seconds
        let expire = policy.expireAfter?.components.seconds
        let sendToStale = policy.sendToStale
        try await transaction { connection in
            try await Self.insertAudit(connection, audit)
            try await connection.run(
                #"""
                UPDATE project SET "tokenStaleAfter" = \#(stale), "tokenExpireAfter" = \#(expire),
                  "tokenSendToStale" = \#(sendToStale), "tokenSweepAt" = NULL
                WHERE id = \#(project.rowID)
                """#)
        }
    }

    public func claimTokenSweep(of project: Project, at now: Date, unlessClaimedSince since: Date) async throws -> Bool
    {
        let (at, after) = (EpochMilliseconds.milliseconds(now), EpochMilliseconds.milliseconds(since))
        return try await database.withConnection { connection in
            // One statement: PostgreSQL re-checks the WHERE on the row it locks, so of two servers
            // claiming at once, one updates it and the other finds it claimed.
            try await connection.count(
                #"""
                UPDATE project SET "tokenSweepAt" = \#(at)
                WHERE id = \#(project.rowID) AND "tokenExpireAfter" IS NOT NULL
                  AND ("tokenSweepAt" IS NULL OR "tokenSweepAt" < \#(after))
                RETURNING 1
                """#) == 1
        }
    }

    public func registeredTokens(lastSeenBefore cutoff: Date, in project: Project, limit: Int) async throws
        -> [String]
    {
        let before = EpochMilliseconds.milliseconds(cutoff)
        return try await database.withConnection { connection in
            var tokens: [String] = []
            for try await token in try await connection.query(
                #"""
                SELECT value FROM token
                WHERE "projectId" = \#(project.rowID) AND state = 'registered'
                  AND COALESCE("lastSeenAt", "updatedAt") < \#(before)
                ORDER BY COALESCE("lastSeenAt", "updatedAt") LIMIT \#(limit)
                """#, logger: .silent
            ).decode(String.self) {
                tokens.append(token)
            }
            return tokens
        }
    }

    public func registeredTokensBySeenDay(in project: Project) async throws -> [Int32: Int] {
        try await database.withConnection { connection in
            var days: [Int32: Int] = [:]
            for try await (day, count) in try await connection.query(
                #"""
                SELECT COALESCE("lastSeenAt", "updatedAt") / 86400000 AS day, COUNT(*) FROM token
                WHERE "projectId" = \#(project.rowID) AND state = 'registered' GROUP BY day
                """#, logger: .silent
            ).decode((Int64, Int64).self) {
                days[Int32(clamping: day)] = Int(count)
            }
            return days
        }
    }
}

extension PostgresWriteDriver {
    public func queueWebhookEvents(_ batch: WebhookEventBatch, project: Int64) async throws {
        try await connection.appendWebhookEvents(batch, project: project, job: 0, finished: false)
    }
}
