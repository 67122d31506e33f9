import Foundation
import PostgresNIO
import Registry

/// Each project's rate and the current second's budget (see `SendBudgetStore`): the `sendBudget`
/// table of migration v4. Servers taking slices of one project's budget at once queue on its row.
extension PostgresStore: SendBudgetStore {
    public func sendRates() async throws -> [Int64: Int] {
        try await database.withConnection { connection in
            var rates: [Int64: Int] = [:]
            for try await (project, rate) in try await connection.query(
                #"SELECT "projectId", rate FROM "sendBudget" WHERE rate IS NOT NULL"#, logger: .silent
            ).decode((Int64, Int32).self) {
                rates[project] = Int(rate)
            }
            return rates
        }
    }

    public func setSendRate(_ rate: Int?, for project: Project) async throws {
        let rate = rate.map { Int32($0) }
        try await transaction { connection in
            try await connection.run(
                #"""
                INSERT INTO "sendBudget" ("projectId", rate) VALUES (\#(project.rowID), \#(rate))
                ON CONFLICT ("projectId") DO UPDATE SET rate = excluded.rate
                """#)
        }
    }

    public func takeSendBudget(project: Int64, slice: Int, rate: Int, overdraw: Bool) async throws -> SendBudgetSlice {
        try await transaction { connection in
            // The row, locked: a project's servers take their slices one after another, each
            // by the database's clock, whatever their own say.
            var now = 0.0
            var used = 0
            for try await (clock, current, spent) in try await connection.query(
                #"""
                WITH budget AS (
                  INSERT INTO "sendBudget" ("projectId") VALUES (\#(project))
                  ON CONFLICT ("projectId") DO UPDATE SET "projectId" = excluded."projectId"
                  RETURNING second, used)
                SELECT extract(epoch FROM clock_timestamp())::float8, second, used FROM budget
                """#, logger: .silent
            ).decode((Double, Int64, Int64).self) {
                now = clock
                used = current == Int64(clock.rounded(.down)) ? Int(spent) : 0
            }
            let taken = SendBudgetSlice.grant(slice, used: used, rate: rate, overdraw: overdraw)
            try await connection.run(
                #"""
                UPDATE "sendBudget" SET second = \#(Int64(now.rounded(.down))), used = \#(Int64(used + taken))
                WHERE "projectId" = \#(project)
                """#)
            return SendBudgetSlice.taking(taken, at: now)
        }
    }

    public func pausedProjects(at now: Date) async throws -> [Int64: Date] {
        try await database.withConnection { connection in
            var paused: [Int64: Date] = [:]
            for try await (project, until) in try await connection.query(
                #"SELECT "projectId", "pausedUntil" FROM relay WHERE "pausedUntil" > \#(EpochMilliseconds.milliseconds(now))"#,
                logger: .silent
            ).decode((Int64, Int64).self) {
                paused[project] = EpochMilliseconds.date(until)
            }
            return paused
        }
    }
}
