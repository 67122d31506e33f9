import Foundation
import GRDB
import Registry

/// `import` and `import-groups`, and the notification keys they bring.
extension SQLiteStore {
    /// The batch in one savepoint, merged by the shared rules (`ArchiveMerge`) over this store's
    /// statements; with `rollingBack`, the savepoint is rolled back once every record was taken.
    public func importBatch(
        _ records: [NumberedRecord], limits: Limits, ownSecret: [UInt8], mergingCredentials: Bool, rollingBack: Bool
    ) async throws -> Committed<ImportTally> {
        try await committing { db, log in
            // Used only on this thread: the merge's jobs run here, inside this write.
            nonisolated(unsafe) let db = db
            nonisolated(unsafe) let log = log
            return try WriterThreadExecutor.run {
                try await ArchiveMerge.run(
                    records, over: SQLiteArchiveDriver(db: db), log: log, limits: limits, ownSecret: ownSecret,
                    mergingCredentials: mergingCredentials, rollingBack: rollingBack)
            }
        }
    }

    public func exportSize(project: String?) async throws -> Int {
        try await read { db in
            try Int.fetchOne(
                db,
                sql: """
                    WITH chosen AS (SELECT id FROM project WHERE ?1 IS NULL OR projectId = ?1)
                    SELECT (SELECT count(*) FROM chosen)
                        + (SELECT count(*) FROM topic WHERE projectId IN (SELECT id FROM chosen))
                        + (SELECT count(*) FROM token WHERE projectId IN (SELECT id FROM chosen))
                        + (SELECT count(*) FROM deviceGroup WHERE projectId IN (SELECT id FROM chosen))
                    """, arguments: [project]) ?? 0
        }
    }

    public func finishImport() async throws {
        try await write { db, _ in
            try db.execute(
                sql: "DELETE FROM topic WHERE NOT EXISTS (SELECT 1 FROM subscription WHERE subscription.topicId = topic.id)")
        }
    }

    /// The group id of a key whose group was deleted: no group has it (ids start at 1), so the key
    /// reaches no one and group operations answer `notification_key not found`.
    static let deletedGroup: Int64 = 0

    public func groupID(
        forImportedKey key: String, in project: Project,
        opening open: @escaping @Sendable ([NotificationKeyring]) -> (keyring: Int64, group: Int64)?
    ) async throws -> Int64? {
        try await read { db in
            if let row = try Row.fetchOne(
                db.cachedStatement(sql: "SELECT groupId FROM importedKey WHERE projectId = ? AND notificationKey = ?"),
                arguments: [project.rowID, key])
            {
                return row["groupId"] ?? Self.deletedGroup
            }
            let keyrings = try Row.fetchAll(
                db.cachedStatement(sql: "SELECT id, secret, sealedFor FROM keyring WHERE projectId = ? ORDER BY id"),
                arguments: [project.rowID]
            ).map { NotificationKeyring(id: $0["id"], secret: [UInt8]($0["secret"] as Data), sealedFor: $0["sealedFor"]) }
            guard !keyrings.isEmpty, let (keyring, group) = open(keyrings) else { return nil }
            // A key the keyring opens is a notification key, even of a group not (or no more) here.
            return try Int64.fetchOne(
                db.cachedStatement(sql: "SELECT groupId FROM keyringGroup WHERE keyringId = ? AND sourceGroupId = ?"),
                arguments: [keyring, group]) ?? Self.deletedGroup
        }
    }
}
