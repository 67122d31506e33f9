import Foundation
import PostgresNIO
import Registry

/// `import` and `import-groups` on PostgreSQL.
extension PostgresStore: ArchiveStore {
    public func exportSize(project: String?) async throws -> Int {
        let count = try await database.withConnection { connection in
            try await connection.one(
                #"""
                WITH chosen AS (SELECT id FROM project WHERE \#(project)::text IS NULL OR "projectId" = \#(project))
                SELECT (SELECT count(*) FROM chosen)
                    + (SELECT count(*) FROM topic WHERE "projectId" IN (SELECT id FROM chosen))
                    + (SELECT count(*) FROM token WHERE "projectId" IN (SELECT id FROM chosen))
                    + (SELECT count(*) FROM "deviceGroup" WHERE "projectId" IN (SELECT id FROM chosen))
                """#, as: Int64.self)
        }
        return Int(count)
    }

    /// The batch in one transaction, merged by the shared rules (`ArchiveMerge`) over this
    /// store's statements; with `rollingBack`, the transaction is rolled back once every record
    /// was taken.
    public func importBatch(
        _ records: [NumberedRecord], limits: Limits, ownSecret: [UInt8], mergingCredentials: Bool, rollingBack: Bool
    ) async throws -> Committed<ImportTally> {
        try await committing { connection, log in
            try await ArchiveMerge.run(
                records, over: PostgresArchiveDriver(connection: connection), log: log, limits: limits,
                ownSecret: ownSecret, mergingCredentials: mergingCredentials, rollingBack: rollingBack)
        }
    }

    /// Each empty topic is removed as a write removes one: locked first, then looked at again, so
    /// that a topic a running write is subscribing to stays.
    public func finishImport() async throws {
        let empty = try await database.withConnection { connection in
            var empty: [Int64] = []
            for try await id in try await connection.query(
                #"SELECT id FROM topic WHERE NOT EXISTS (SELECT 1 FROM subscription WHERE subscription."topicId" = topic.id)"#,
                logger: .silent
            ).decode(Int64.self) { empty.append(id) }
            return empty
        }
        for id in empty {
            try await transaction { connection in try await connection.removeTopicIfEmpty(id) }
        }
    }
}
