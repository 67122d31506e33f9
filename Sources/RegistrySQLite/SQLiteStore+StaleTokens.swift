import Foundation
import GRDB
import Registry

/// The stale tokens a fan-out leaves out (`RegistryService.skippingStale`): the rule is the
/// registry's, this only reads the last-seen index.
extension SQLiteStore {
    public func registeredTokenIDs(lastSeenBefore cutoff: Date, in project: Project) async throws -> [UInt32] {
        try await read { db in
            let rows = try Int64.fetchCursor(
                db.cachedStatement(
                    sql: """
                        SELECT id FROM token INDEXED BY token_lastSeen
                        WHERE projectId = ? AND state = 'registered' AND COALESCE(lastSeenAt, updatedAt) < ?
                        """),
                arguments: [project.rowID, EpochMilliseconds.milliseconds(cutoff)])
            var ids: [UInt32] = []
            while let id = try rows.next() { ids.append(UInt32(truncatingIfNeeded: id)) }
            return ids
        }
    }
}
