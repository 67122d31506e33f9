import Foundation
import Logging
import PostgresNIO
import RegistryPostgres
import Testing

/// The database the PostgreSQL suites use: `FCM_REGISTRY_TEST_POSTGRES`, a URL to a database they
/// may fill and empty (`Tests/postgres/cluster.sh start` makes one). Without it they are skipped,
/// and say so.
enum TestPostgres {
    static let url = ProcessInfo.processInfo.environment["FCM_REGISTRY_TEST_POSTGRES"]
    static let available = url != nil
    static let skipped: Comment = "no PostgreSQL: set FCM_REGISTRY_TEST_POSTGRES (Tests/postgres/cluster.sh start DIR)"

    /// Runs `body` with a store over a schema of its own, dropped afterwards.
    static func withStore(_ body: (PostgresStore) async throws -> Void) async throws {
        let schema = "test_\(UInt64.random(in: 0...UInt64.max))"
        var location = try PostgresLocation(parsing: try #require(url))
        let admin = try PostgresStore(location, logger: Logger(label: "test"))
        location.schema = schema
        let store = try PostgresStore(location, logger: Logger(label: "test"))
        var failure: (any Error)?
        do {
            _ = try await admin.database.query(PostgresQuery(unsafeSQL: "CREATE SCHEMA \(schema)"))
            try await body(store)
        } catch {
            failure = error
        }
        _ = try? await admin.database.query(PostgresQuery(unsafeSQL: "DROP SCHEMA \(schema) CASCADE"))
        await store.close()
        await admin.close()
        if let failure { throw failure }
    }
}

@Suite("PostgreSQL: migrations", .enabled(if: TestPostgres.available, TestPostgres.skipped))
struct PostgresMigrationTests {
    @Test("Three servers migrating a new database at once apply each migration once; again, nothing")
    func migrate() async throws {
        try await TestPostgres.withStore { store in
            // Three servers starting at once: one of them applies each migration.
            let applied = try await withThrowingTaskGroup(of: [String].self) { group in
                for _ in 0..<3 { group.addTask { try await store.migrate() } }
                return try await group.reduce(into: []) { $0 += $1 }
            }
            #expect(
                applied == [
                    "v1-registry", "v2-concurrent-writes", "v3-mirror", "v4-send-budget", "v6-idempotency", "v7-webhooks",
                    "v8-minute-stats", "v9-channel-settings", "v10-relay-error-time", "v11-message-cancel",
                    "v13-key-scopes", "v14-service-account-scopes", "v12-webhook-fairness", "v15-audit-log",
                    "v16-token-attributes", "v17-token-policy", "v18-skipped-stale", "v19-attribute-feed",
                ])
            #expect(try await store.migrate() == [])
            let tables = try await store.database.query(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY 1"
            ).map { try $0.decode(String.self) }
            for table in ["project", "token", "deviceGroup", "groupMember", "topic", "subscription", "audienceChange",
                          "message", "outbox", "delivery", "relay", "idempotencyKey", "schemaMigration"] {
                #expect(tables.contains(table), "\(table)")
            }
        }
    }
}
