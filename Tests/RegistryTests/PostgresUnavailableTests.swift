import Foundation
import Logging
import PostgresNIO
import Registry
import RegistryPostgres
import Testing

@Suite("PostgreSQL: a database out of reach", .enabled(if: TestPostgres.available, TestPostgres.skipped))
struct PostgresUnavailableTests {
    @Test("A connection PostgreSQL ends in the middle of a write fails it as unavailable, and nothing is written")
    func connectionEnded() async throws {
        try await TestPostgres.withProject { store, project in
            let failure = await #expect(throws: (any Error).self) {
                try await store.client.withTransaction(logger: Logger(label: "test")) { connection in
                    _ = try await connection.query(
                        #"INSERT INTO topic ("projectId", name, "createdAt") VALUES (\#(project.rowID), 'lost', 0)"#,
                        logger: Logger(label: "test")
                    ).collect()
                    // What an administrator's pg_terminate_backend, or a server restart, does.
                    _ = try await connection.query("SELECT pg_terminate_backend(pg_backend_pid())", logger: Logger(label: "test"))
                        .collect()
                }
            }
            let lost = try #require(failure as? any StoreConnectionFailure)
            #expect(lost.meansUnavailable)
            #expect(try await store.topics(in: project, prefix: "lost", after: nil, limit: 10).items.isEmpty)
        }
    }

    @Test("A refused write is not mistaken for a lost database")
    func refusedWrite() async throws {
        try await TestPostgres.withProject { store, project in
            let failure = await #expect(throws: (any Error).self) {
                _ = try await store.client.query(
                    #"INSERT INTO topic ("projectId", name, "createdAt") VALUES (\#(project.rowID), NULL, 0)"#
                ).collect()
            }
            #expect((failure as? any StoreConnectionFailure)?.meansUnavailable != true)
        }
    }
}
