import Foundation
import GRDB
import Logging
import PostgresNIO
import Registry
import RegistryPostgres
import RegistrySQLite
import Testing

/// The stores the suites run on. A suite marked `.onEveryBackend` runs each of its tests once on
/// SQLite and again on PostgreSQL, and every store it makes with `TestBackend.makeStore()` is of
/// the pass's backend.
///
/// - `FCM_REGISTRY_TEST_POSTGRES`: a URL to a database the suites may fill and empty
///   (`Tests/postgres/cluster.sh start DIR` prints one). Without it the PostgreSQL pass is skipped,
///   and the run says so once.
/// - `FCM_REGISTRY_TEST_BACKENDS`: `sqlite` or `postgres` to run one pass only, which tells which
///   backend an expectation failed on.
public enum TestBackend: String, Sendable, CaseIterable {
    case sqlite
    case postgres

    /// The pass the running test is in.
    @TaskLocal public static var current: TestBackend = .sqlite
    @TaskLocal static var scope: BackendScope?

    public static let postgresURL = ProcessInfo.processInfo.environment["FCM_REGISTRY_TEST_POSTGRES"]

    /// The passes a test marked `.onEveryBackend` makes.
    static let passes: [TestBackend] = {
        let chosen = ProcessInfo.processInfo.environment["FCM_REGISTRY_TEST_BACKENDS"].map {
            $0.split(separator: ",").compactMap { TestBackend(rawValue: String($0)) }
        } ?? allCases
        if chosen.contains(.postgres) && postgresURL == nil {
            FileHandle.standardError.write(
                Data("PostgreSQL pass skipped: set FCM_REGISTRY_TEST_POSTGRES (Tests/postgres/cluster.sh start DIR)\n".utf8))
            return chosen.filter { $0 != .postgres }
        }
        return chosen
    }()

    /// A fresh, empty store of the current pass: SQLite in memory, or PostgreSQL in a schema of
    /// its own, migrated, and dropped when the test ends.
    public static func makeStore(feedRetention: Int = Limits().feedRetention) async throws -> any RegistryBackend {
        guard current == .postgres else { return SQLiteStore(try RegistryDatabase.inMemory(), feedRetention: feedRetention) }
        let scope = try #require(scope, "a PostgreSQL store is made inside an .onEveryBackend test")
        return try await scope.makePostgresStore(feedRetention: feedRetention)
    }
}

/// Runs each test once per backend in `TestBackend.passes`; apply it to a suite.
public struct OnEveryBackend: TestTrait, SuiteTrait, TestScoping {
    public var isRecursive: Bool { true }

    public func provideScope(
        for test: Test, testCase: Test.Case?, performing function: @Sendable () async throws -> Void
    ) async throws {
        guard !test.isSuite else { return try await function() }
        for backend in TestBackend.passes {
            // The PostgreSQL pass waits for its turn (`PostgresPassGate`) and gives it back at its end.
            let gate = backend == .postgres ? PostgresPassGate.shared : nil
            await gate?.enter()
            let scope = BackendScope()
            do {
                try await TestBackend.$current.withValue(backend) {
                    try await TestBackend.$scope.withValue(scope) { try await function() }
                }
            } catch {
                await scope.close()
                await gate?.leave()
                throw OnBackend(backend: backend, error: error)
            }
            await scope.close()
            await gate?.leave()
        }
    }
}

extension Trait where Self == OnEveryBackend {
    /// Each test of the suite runs on SQLite, then on PostgreSQL.
    public static var onEveryBackend: Self { OnEveryBackend() }
}

/// A test's error, with the backend it was thrown on.
struct OnBackend: Error, CustomStringConvertible {
    var backend: TestBackend
    var error: any Error
    var description: String { "on \(backend.rawValue): \(String(reflecting: error))" }
}

/// The PostgreSQL stores one test made, closed and their schemas dropped when it ends.
actor BackendScope {
    /// Creates and drops the tests' schemas; one pool for the whole run.
    private static let admin: PostgresStore? = TestBackend.postgresURL.flatMap { url in
        (try? PostgresLocation(parsing: url)).flatMap { try? PostgresStore($0, maximumConnections: 4, logger: quiet) }
    }
    private static let quiet: Logger = {
        var logger = Logger(label: "test.postgres")
        logger.logLevel = .warning
        return logger
    }()

    private var made: [(store: PostgresStore, schema: String)] = []
    private var reopened: [PostgresStore] = []

    func makePostgresStore(feedRetention: Int) async throws -> PostgresStore {
        let admin = try #require(Self.admin, "FCM_REGISTRY_TEST_POSTGRES is a PostgreSQL URL")
        await admin.started()
        let schema = "test_\(UInt64.random(in: 0...UInt64.max))"
        _ = try await admin.database.query(PostgresQuery(unsafeSQL: "CREATE SCHEMA \(schema)"))
        var location = admin.location
        location.schema = schema
        let store = try PostgresStore(location, feedRetention: feedRetention, maximumConnections: 2, logger: Self.quiet)
        made.append((store, schema))
        _ = try await store.migrate()
        return store
    }

    func reopen(_ store: PostgresStore) async throws -> PostgresStore {
        let again = try PostgresStore(
            store.location, feedRetention: store.feedRetention, maximumConnections: 2, logger: Self.quiet)
        reopened.append(again)
        await again.started()
        return again
    }

    func close() async {
        for store in reopened { await store.close() }
        reopened = []
        guard let admin = Self.admin else { return }
        for (store, schema) in made {
            await store.close()
            _ = try? await admin.database.query(PostgresQuery(unsafeSQL: "DROP SCHEMA \(schema) CASCADE"))
        }
        made = []
    }
}

extension TestBackend {
    /// The rows of `table` in `store` (the backends name their tables alike), for tests that
    /// check what a write left behind.
    public static func rowCount(_ table: String, in store: any RegistryBackend) async throws -> Int {
        precondition(table.allSatisfy { $0.isLetter }, "a table name")
        if let store = store as? SQLiteStore {
            return try await store.database.writer.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM \(table)") ?? 0 }
        }
        let store = try #require(store as? PostgresStore)
        let rows = try await store.database.query(PostgresQuery(unsafeSQL: "SELECT COUNT(*) FROM \"\(table)\""))
        return try rows.first?.decode(Int.self) ?? 0
    }

    /// Runs one statement of the test's own on `store`'s database (the backends name their tables
    /// alike), to put the database in a state no API call makes.
    public static func execute(_ sql: String, in store: any RegistryBackend) async throws {
        if let store = store as? SQLiteStore {
            return try await store.database.writer.write { db in try db.execute(sql: sql) }
        }
        let store = try #require(store as? PostgresStore)
        _ = try await store.database.query(PostgresQuery(unsafeSQL: sql))
    }

    /// A second store over the same database as `store`, as another server (or a restart) opens it.
    public static func reopen(_ store: any RegistryBackend) async throws -> any RegistryBackend {
        if let store = store as? SQLiteStore { return SQLiteStore(store.database) }
        let store = try #require(store as? PostgresStore)
        let scope = try #require(scope, "a PostgreSQL store is reopened inside an .onEveryBackend test")
        return try await scope.reopen(store)
    }
}
