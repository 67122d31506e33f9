import Foundation
import GRDB
import Registry

/// Each project's token policy and the expiry sweep's statements (migration v23): the rules are
/// `TokenPolicy`'s and `TokenExpirySweep`'s.
extension SQLiteStore {
    public func tokenPolicy(of project: Project) async throws -> TokenPolicy {
        try await read { db in
            guard
                let row = try Row.fetchOne(
                    db.cachedStatement(
                        sql: "SELECT tokenStaleAfter, tokenExpireAfter, tokenSendToStale FROM project WHERE id = ?"),
                    arguments: [project.rowID])
            else { return .standard }
            return TokenPolicy(
                staleAfter: .seconds(row[0] as Int64), expireAfter: (row[1] as Int64?).map { .seconds($0) },
                sendToStale: row[2] as Bool)
        }
    }

    public func setTokenPolicy(_ policy: TokenPolicy, for project: Project, audit: AuditWrite?) async throws {
        try await write { db, _ in
            try Self.insertAudit(db, audit)
            try db.execute(
                sql: """
                    UPDATE project SET tokenStaleAfter = ?, tokenExpireAfter = ?, tokenSendToStale = ?, tokenSweepAt = NULL
                    WHERE id = ?
                    """,
                arguments: [
                    policy.staleAfter.components.seconds, policy.expireAfter?.components.seconds, policy.sendToStale,
                    project.rowID,
                ])
        }
    }

    public func claimTokenSweep(of project: Project, at now: Date, unlessClaimedSince since: Date) async throws -> Bool
    {
        try await write { db, _ in
            try db.execute(
                sql: """
                    UPDATE project SET tokenSweepAt = ?
                    WHERE id = ? AND tokenExpireAfter IS NOT NULL AND (tokenSweepAt IS NULL OR tokenSweepAt < ?)
                    """,
                arguments: [
                    EpochMilliseconds.milliseconds(now), project.rowID, EpochMilliseconds.milliseconds(since),
                ])
            return db.changesCount == 1
        }
    }

    public func registeredTokens(lastSeenBefore cutoff: Date, in project: Project, limit: Int) async throws
        -> [String]
    {
        try await read { db in
            try String.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT value FROM token INDEXED BY token_lastSeen
                        WHERE projectId = ? AND state = 'registered' AND COALESCE(lastSeenAt, updatedAt) < ?
                        ORDER BY COALESCE(lastSeenAt, updatedAt) LIMIT ?
                        """),
                arguments: [project.rowID, EpochMilliseconds.milliseconds(cutoff), limit])
        }
    }

    public func registeredTokensBySeenDay(in project: Project) async throws -> [Int32: Int] {
        try await read { db in
            var days: [Int32: Int] = [:]
            for row in try Row.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT COALESCE(lastSeenAt, updatedAt) / 86400000 AS day, COUNT(*) FROM token INDEXED BY token_lastSeen
                        WHERE projectId = ? AND state = 'registered' GROUP BY day
                        """), arguments: [project.rowID])
            {
                days[Int32(clamping: row[0] as Int64)] = row[1]
            }
            return days
        }
    }
}

extension SQLiteWriteDriver {
    public func queueWebhookEvents(_ batch: WebhookEventBatch, project: Int64) async throws {
        try SQLiteStore.appendWebhookEvents(batch, project: project, job: 0, finished: false, db)
    }
}
