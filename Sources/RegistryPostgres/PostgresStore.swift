import Logging
import PostgresNIO
import Registry
import ServiceLifecycle

/// The registry on PostgreSQL: one `DatabasePool` (postgres-nio's pool with bounded waits, a
/// peer in `serve`'s service group) over the tables of `PostgresMigrations`, shared by every server pointed at the
/// same database.
public struct PostgresStore: Sendable {
    public let location: PostgresLocation
    /// Every statement goes through it.
    public let database: DatabasePool
    let logger: Logger
    /// Entries of the change feed kept for followers that fall behind.
    public let feedRetention: Int

    /// Runs the pool from the store's creation: migrations, the audience load and every command
    /// use it before (or without) a service group.
    let pool: PoolRunner
    /// Tells the other servers this one committed changes.
    let doorbell: FeedDoorbell

    /// A store over the database `location` names; its pool runs at once.
    /// - Parameter maximumConnections: the pool's bound (postgres-nio's default is 20); the test
    ///   suites, which open a store per test, use fewer.
    /// - Throws: `PostgresLocationError` when the TLS files cannot be read.
    public init(
        _ location: PostgresLocation, feedRetention: Int = Limits().feedRetention, maximumConnections: Int? = nil,
        logger: Logger
    ) throws(PostgresLocationError) {
        self.location = location
        self.feedRetention = feedRetention
        self.logger = logger
        database = try DatabasePool(location, maximumConnections: maximumConnections, logger: logger)
        doorbell = FeedDoorbell(database: database, logger: logger)
        pool = PoolRunner(database, doorbell: doorbell)
    }

    /// What runs beside the store in `serve`'s service group: the pool, until the group shuts down.
    public var services: [any Service] { [pool] }

    /// Returns once the pool runs (`migrate` waits for it too).
    public func started() async {
        await pool.started()
    }

    /// Closes the pool, for a store used without a service group (tests, a command's end).
    public func close() async {
        await pool.stop()
    }

    /// Makes sure PostgreSQL can be reached with this URL's credentials before anything else: a
    /// refused or timed-out connection (the database still starting, say) is tried again for up
    /// to `patience`; a refusal that trying again cannot mend (a wrong password, an unknown
    /// database, TLS the server does not offer) fails at once, in PostgreSQL's own words.
    /// - Throws: `PostgresStoreError` saying why.
    public func connect(patience: Duration = .seconds(10)) async throws {
        let deadline = ContinuousClock.now + patience
        while true {
            do {
                return try await database.probe()
            } catch {
                let retrying = Self.worthRetrying(error) && ContinuousClock.now + DatabasePool.probeInterval < deadline
                guard retrying else { throw PostgresStoreError(cannotConnect: error, location: location, after: patience) }
                try await Task.sleep(for: DatabasePool.probeInterval)
            }
        }
    }

    /// A connection refused or timed out, or a server still starting up: it may answer soon. A
    /// host the resolver does not know will not.
    static func worthRetrying(_ error: any Error) -> Bool {
        if error is DeadlineExceeded { return true }
        guard let error = error as? PSQLError else { return false }
        switch error.code {
        case .connectionError: return PostgresReach(error, host: "", port: 0)?.unknownHost != true
        case .server: return ["57P03", "53300"].contains(error.serverInfo?[.sqlState] ?? "")
        default: return false
        }
    }

    /// Brings the database's tables up to date; safe when several servers start at once.
    /// - Returns: the migrations applied now.
    public func migrate() async throws -> [String] {
        await pool.started()
        let logger = logger
        return try await database.withConnection(bounded: false) { connection in
            try await PostgresMigrations.migrate(connection, logger: logger)
        }
    }
}

/// The store's pool as a peer of the service group: it runs from the store's creation (the store
/// is used before the group starts: migrations, the audience load, the first project, and by
/// commands that have no group at all), and is stopped by the group.
final class PoolRunner: Service, Sendable {
    private let database: DatabasePool
    private let doorbell: FeedDoorbell

    init(_ database: DatabasePool, doorbell: FeedDoorbell) {
        self.database = database
        self.doorbell = doorbell
    }

    /// Returns once the pool runs: a connection leased before logs postgres-nio's warning.
    func started() async {
        await database.started()
    }

    /// Waits for the group's shutdown (the group stops the store's peers last), then stops the pool.
    func run() async throws {
        try? await gracefulShutdown()
        await stop()
    }

    /// Sends the last ring, then closes the pool's connections.
    func stop() async {
        await doorbell.stop()
        await database.stop()
    }
}
