import Foundation
import GRDB
import Registry

/// Each project's rate and the current second's budget (see `SendBudgetStore`): the `sendBudget`
/// table of migration v10.
extension SQLiteStore: SendBudgetStore {
    public func sendRates() async throws -> [Int64: Int] {
        try await read { db in
            var rates: [Int64: Int] = [:]
            for row in try Row.fetchAll(db, sql: "SELECT projectId, rate FROM sendBudget WHERE rate IS NOT NULL") {
                rates[row[0]] = row[1]
            }
            return rates
        }
    }

    public func setSendRate(_ rate: Int?, for project: Project) async throws {
        try await write { db, _ in
            try db.execute(
                sql: """
                    INSERT INTO sendBudget (projectId, rate) VALUES (?, ?)
                    ON CONFLICT (projectId) DO UPDATE SET rate = excluded.rate
                    """, arguments: [project.rowID, rate])
        }
    }

    public func takeSendBudget(project: Int64, slice: Int, rate: Int, overdraw: Bool) async throws -> SendBudgetSlice {
        try await write { db, _ in
            // Every server on a SQLite database runs on this machine, under one clock.
            let now = Date().timeIntervalSince1970
            let second = Int64(now.rounded(.down))
            let row = try Row.fetchOne(
                db.cachedStatement(sql: "SELECT second, used FROM sendBudget WHERE projectId = ?"), arguments: [project])
            let used: Int = row.flatMap { ($0["second"] as Int64) == second ? $0["used"] : nil } ?? 0
            let taken = SendBudgetSlice.grant(slice, used: used, rate: rate, overdraw: overdraw)
            try db.cachedStatement(
                sql: """
                    INSERT INTO sendBudget (projectId, second, used) VALUES (?, ?, ?)
                    ON CONFLICT (projectId) DO UPDATE SET second = excluded.second, used = excluded.used
                    """
            ).execute(arguments: [project, second, used + taken])
            return SendBudgetSlice.taking(taken, at: now)
        }
    }

    public func pausedProjects(at now: Date) async throws -> [Int64: Date] {
        try await read { db in
            var paused: [Int64: Date] = [:]
            for row in try Row.fetchAll(
                db, sql: "SELECT projectId, pausedUntil FROM relay WHERE pausedUntil > ?",
                arguments: [EpochMilliseconds.milliseconds(now)])
            {
                paused[row[0]] = EpochMilliseconds.date(row[1])
            }
            return paused
        }
    }
}
