import Foundation
import Logging
import PostgresNIO
import Registry
import RegistryPostgres
import Testing

@Suite("PostgreSQL: a database out of reach", .enabled(if: TestPostgres.available, TestPostgres.skipped))
struct PostgresUnavailableTests {
    // A connection PostgreSQL ends under a write (pg_terminate_backend) was tried as a test and
    // left out: what postgres-nio reports then depends on timing. Seen by hand instead: a server
    // whose PostgreSQL was stopped answered 503 with Retry-After, then 200 once it was back.

    @Test("A refused write is not mistaken for a lost database")
    func refusedWrite() async throws {
        try await TestPostgres.withProject { store, project in
            let failure = await #expect(throws: (any Error).self) {
                _ = try await store.database.query(
                    #"INSERT INTO topic ("projectId", name, "createdAt") VALUES (\#(project.rowID), NULL, 0)"#
                )
            }
            #expect((failure as? any StoreConnectionFailure)?.meansUnavailable != true)
        }
    }
}
