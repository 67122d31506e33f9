import Foundation
import PostgresNIO
import Registry

/// The stale tokens a fan-out leaves out (`RegistryService.skippingStale`): the rule is the
/// registry's, this only reads the last-seen index.
extension PostgresStore {
    public func registeredTokenIDs(lastSeenBefore cutoff: Date, in project: Project) async throws -> [UInt32] {
        let before = EpochMilliseconds.milliseconds(cutoff)
        return try await database.withConnection { connection in
            var ids: [UInt32] = []
            for try await id in try await connection.query(
                #"""
                SELECT id FROM token
                WHERE "projectId" = \#(project.rowID) AND state = 'registered'
                  AND COALESCE("lastSeenAt", "updatedAt") < \#(before)
                """#, logger: .silent
            ).decode(Int32.self) {
                ids.append(UInt32(bitPattern: id))
            }
            return ids
        }
    }
}
