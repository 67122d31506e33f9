import Logging
import PostgresNIO
import Registry
import Synchronization

/// The store's connections to PostgreSQL: postgres-nio's pool, with the bounds a server behind a
/// load balancer needs when the database goes away and comes back.
///
/// - A request waits at most `leaseWait` for a connection, and at most `outageLeaseWait` once the
///   database is known to be out of reach, then fails with `LeaseTimedOut`, which the API answers
///   503 with `Retry-After`. postgres-nio alone would hold it for a minute before its circuit
///   breaker trips. A wait longer than `suspicion` starts the probe (below): if the probe cannot
///   connect either, the database is out of reach and the waits end; if it can, the pool is only
///   busy or slow (a loaded machine), and the request waits on.
/// - A statement whose connection closes under it, or that runs past `statementDeadline` (a
///   network cut that no reset announces), is abandoned and its connection closed, so that no
///   caller waits for ever and no half-done transaction goes back to the pool.
/// - A connection refused or lost marks the database out of reach at once; a long wait makes it a
///   suspect. Either starts the probe: a fresh connection every 500 ms, outside the pool, whose
///   error is logged as the outage's cause. Once one succeeds, and the pool has handed out no
///   connection since the outage began and cannot within a second (it backs off up to a minute
///   between attempts after a long outage), a new pool takes its place; the old one is closed a
///   minute later. So requests succeed again within seconds of the database's return, however
///   long it was gone.
public final class DatabasePool: Sendable {
    /// How long a request waits for a connection while the database answers (every connection of
    /// the pool busy, or a machine so loaded that connecting takes seconds).
    static let leaseWait = Duration.seconds(10)
    /// How long a request waits once the database is known to be out of reach.
    static let outageLeaseWait = Duration.seconds(1)
    /// A wait this long has the probe find out whether the database can be reached.
    static let suspicion = Duration.seconds(1)
    /// A TCP connection and PostgreSQL's start-up (its password exchange) must be done within this.
    static let connectTimeout = Duration.seconds(5)
    static let probeInterval = Duration.milliseconds(500)
    /// How often a statement's connection is checked while the statement runs, and how long a
    /// statement may go on after its connection closed.
    static let closedConnectionCheck = Duration.milliseconds(500)
    /// How long a replaced pool keeps running what was leased from it before it is closed.
    static let retiredPoolGrace = Duration.seconds(60)
    /// How long a request's work on one connection may take before it is given up as lost to a
    /// silent network: requests take milliseconds. Bulk work (imports, exports, the audience load,
    /// migrations, `generate`) asks for no bound.
    static let statementDeadline = Duration.seconds(60)

    private struct Pool: Sendable {
        let client: PostgresClient
        let runner: Task<Void, Never>
        /// Done once `run()` has begun: a connection leased before that logs postgres-nio's warning.
        let starting: Task<Void, Never>
    }

    private struct State {
        var pool: Pool
        /// Replaced pools, each closed after the grace; removed once closed.
        var retired: [Int: Task<Void, Never>] = [:]
        var nextRetired = 0
        /// Since when the database is known to be out of reach; `nil` while it answers.
        var outOfReachSince: ContinuousClock.Instant?
        var probe: Task<Void, Never>?
        var stopped = false
    }

    private let state: Mutex<State>
    /// When a connection was last handed out, in nanoseconds since `epoch`: a pool that keeps
    /// handing them out is busy, not cut off.
    private let lastLeased = Atomic<Int64>(0)
    private let epoch = ContinuousClock.now
    private let configuration: PostgresClient.Configuration
    /// The same place and credentials, for the probe's connection of its own.
    private let probeConfiguration: PostgresConnection.Configuration
    private let logger: Logger
    private let poolLogger: Logger

    init(_ location: PostgresLocation, maximumConnections: Int?, logger: Logger) throws(PostgresLocationError) {
        var configuration = try location.configuration()
        configuration.options.connectTimeout = Self.connectTimeout
        if let maximumConnections { configuration.options.maximumConnections = maximumConnections }
        self.configuration = configuration
        // postgres-nio logs every failed connection attempt at `info`: an outage would flood the
        // log, where this pool logs the outage once.
        var poolLogger = logger
        poolLogger.logLevel = max(logger.logLevel, .warning)
        var probeConfiguration = try location.connectionConfiguration()
        probeConfiguration.options.connectTimeout = .init(Self.connectTimeout)
        self.probeConfiguration = probeConfiguration
        self.logger = logger
        self.poolLogger = poolLogger
        state = Mutex(State(pool: Self.start(configuration, logger: poolLogger)))
    }

    private static func start(_ configuration: PostgresClient.Configuration, logger: Logger) -> Pool {
        let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        let (started, signal) = AsyncStream.makeStream(of: Void.self)
        // Detached: a pool started from a request's task must not inherit the service group's
        // graceful shutdown (postgres-nio's `run()` ends on it), nor its cancellation.
        let runner = Task.detached {
            signal.finish()
            await client.run()
        }
        let starting = Task {
            for await _ in started {}
            // `run()` marks the pool running in its first statement, right after the signal.
            await Task.yield()
        }
        return Pool(client: client, runner: runner, starting: starting)
    }

    /// Returns once the pool runs.
    func started() async {
        await state.withLock { $0.pool }.starting.value
    }

    /// Whether a failure that means "out of reach" was seen and the database has not answered since.
    public var isOutOfReach: Bool {
        state.withLock { $0.outOfReachSince != nil }
    }

    /// Runs `body` with a connection of the pool; waits at most `leaseWait` for one.
    /// - Parameter bounded: whether the body is given up after `statementDeadline`; bulk work says
    ///   no.
    /// - Throws: `LeaseTimedOut` when no connection came in time, `ConnectionLost` when the
    ///   connection went under the body, or what `body` throws.
    public func withConnection<Result: Sendable>(
        bounded: Bool = true, _ body: @escaping @Sendable (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        let pool = state.withLock { $0.pool }
        await pool.starting.value
        do {
            return try await leasing { leased in
                try await pool.client.withConnection { connection in
                    try leased()
                    self.noteLeased()
                    return try await Self.watched(connection, deadline: bounded ? Self.statementDeadline : nil, body)
                }
            }
        } catch let error as any StoreConnectionFailure where error.meansUnavailable {
            noteFailure(error)
            throw error
        }
    }

    /// Runs `body` on `connection`; gives it up if the connection closes under it and the body
    /// has not ended a second later, if it runs past `deadline`, or if the caller is cancelled.
    /// A body given up has its connection closed: PostgreSQL rolls back what it left open, and the
    /// pool never hands out a connection with someone else's transaction on it.
    ///
    /// postgres-nio hands a statement to the connection's channel without a promise for the
    /// write: on a channel that closed a moment before (PostgreSQL restarting, say, ends every
    /// session), the statement is dropped and its answer never comes. A statement so dropped was
    /// never sent, and PostgreSQL rolled back the transaction it belonged to when it ended the
    /// session, so `ConnectionLost` means nothing was written. A body past its deadline may have
    /// been committing: `StatementTimedOut` says it may have written.
    static func watched<Result: Sendable>(
        _ connection: PostgresConnection, deadline: Duration?,
        _ body: @escaping @Sendable (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        guard !connection.isClosed else { throw ConnectionLost() }
        let finished = FinishFlag()
        let started = ContinuousClock.now
        do {
            return try await abandoning({
                defer { finished.set() }
                return try await body(connection)
            }) {
                while !Task.isCancelled {
                    try? await Task.sleep(for: Self.closedConnectionCheck)
                    if Task.isCancelled { return nil }
                    if connection.isClosed {
                        try? await Task.sleep(for: Self.closedConnectionCheck)
                        return Task.isCancelled ? nil : ConnectionLost()
                    }
                    if let deadline, ContinuousClock.now - started > deadline { return StatementTimedOut(deadline: deadline) }
                }
                return nil
            }
        } catch {
            if !finished.isSet { connection.close().whenComplete { _ in } }
            throw error
        }
    }

    /// Runs `body` in a transaction on a connection of the pool (BEGIN, COMMIT, or ROLLBACK when
    /// it throws); errors as postgres-nio's `withTransaction` wraps them.
    public func withTransaction<Result: Sendable>(
        logger: Logger, _ body: @escaping @Sendable (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        try await withConnection { connection in
            try await connection.withTransaction(logger: logger) { transaction in try await body(transaction) }
        }
    }

    /// Runs one statement and returns its rows.
    public func query(_ query: PostgresQuery, logger: Logger = Logger(label: "fcm-registry.postgres", factory: { _ in SwiftLogNoOpLogHandler() })) async throws -> [PostgresRow] {
        try await withConnection { connection in try await connection.query(query, logger: logger).collect() }
    }

    /// Closes the pool, the probe and any pool it replaced.
    func stop() async {
        let (pool, retired, probe) = state.withLock { state in
            state.stopped = true
            return (state.pool, state.retired.values, state.probe)
        }
        probe?.cancel()
        for task in retired { task.cancel() }
        pool.runner.cancel()
        await pool.runner.value
    }

    // MARK: - Out of reach, and back

    private func noteLeased() {
        lastLeased.store((ContinuousClock.now - epoch).nanoseconds, ordering: .relaxed)
    }

    /// Whether a connection was handed out at or after `instant`.
    private func leased(since instant: ContinuousClock.Instant) -> Bool {
        let last = lastLeased.load(ordering: .relaxed)
        return last > 0 && last >= (instant - epoch).nanoseconds
    }

    /// A failure that may mean the database is out of reach. A connection refused or lost does; a
    /// wait that ran out while the pool hands out connections does not (a busy pool); any other
    /// wait that ran out has the probe decide.
    private func noteFailure(_ error: any StoreConnectionFailure) {
        guard error is LeaseTimedOut else { return noteOutOfReach(error) }
        if leased(since: .now - Self.leaseWait - .seconds(1)) { return }
        suspect()
    }

    /// Marks the database out of reach and starts the probe, unless it already runs.
    private func noteOutOfReach(_ error: any StoreConnectionFailure) {
        markOutOfReach(cause: error.summary)
        suspect()
    }

    /// Marks the database out of reach, logging it once.
    private func markOutOfReach(cause: String) {
        let marked = state.withLock { state -> Bool in
            guard state.outOfReachSince == nil, !state.stopped else { return false }
            state.outOfReachSince = .now
            return true
        }
        if marked {
            logger.warning(
                "PostgreSQL cannot be reached: requests that need it are answered 503 until it answers again",
                metadata: ["cause": "\(cause)"])
        }
    }

    /// Starts the probe unless it runs: it marks the database out of reach if it cannot connect.
    private func suspect() {
        state.withLock { state in
            guard state.probe == nil, !state.stopped else { return }
            // Detached: the request that noticed must not lend it its cancellation or task-locals.
            // Made under the lock, so that two suspects start one probe; it takes the lock to end.
            state.probe = Task.detached { await self.probeUntilReachable() }
        }
    }

    /// Connects every 500 ms until PostgreSQL answers; then makes sure the pool does too. A probe
    /// started on suspicion that connects at once finds no outage, and ends.
    private func probeUntilReachable() async {
        while !Task.isCancelled {
            do {
                try await probe()
                let (pool, outageSince) = state.withLock { ($0.pool, $0.outOfReachSince) }
                guard let since = outageSince else {
                    state.withLock { $0.probe = nil }
                    return
                }
                // A pool that handed out a connection since the outage began has found the
                // database again by itself; one that has not may be backing off for a minute.
                var poolAnswers = leased(since: since)
                if !poolAnswers {
                    poolAnswers =
                        (try? await withDeadline(.seconds(2), "asking the pool for a connection") {
                            try await Self.leasing(within: .seconds(1), outOfReach: { false }) { leased -> Void in
                                try await pool.client.withConnection { connection in
                                    try leased()
                                    try await connection.run("SELECT 1")
                                }
                            }
                        }) != nil
                }
                if !poolAnswers { replacePool() }
                state.withLock { state in
                    state.outOfReachSince = nil
                    state.probe = nil
                }
                logger.notice(
                    "PostgreSQL answers again",
                    metadata: [
                        "after": "\(ContinuousClock.now - since)",
                        "pool": "\(poolAnswers ? "kept" : "replaced")",
                    ])
                return
            } catch {
                markOutOfReach(cause: Self.summary(of: error))
                try? await Task.sleep(for: Self.probeInterval)
            }
        }
    }

    /// One connection of its own, `SELECT 1`, closed: what PostgreSQL says if it refuses.
    func probe() async throws {
        let configuration = probeConfiguration
        try await withDeadline(Self.connectTimeout + .seconds(2), "connecting to PostgreSQL") {
            let connection = try await PostgresConnection.connect(
                configuration: configuration, id: 0, logger: .silent)
            do {
                try await connection.run("SELECT 1")
            } catch {
                try? await connection.close()
                throw error
            }
            try? await connection.close()
        }
    }

    /// Starts a new pool for every lease from now on; the old one is closed after the grace.
    private func replacePool() {
        state.withLock { state in
            guard !state.stopped else { return }
            let old = state.pool
            state.pool = Self.start(configuration, logger: poolLogger)
            let id = state.nextRetired
            state.nextRetired += 1
            state.retired[id] = Task.detached {
                try? await Task.sleep(for: Self.retiredPoolGrace)
                old.runner.cancel()
                await old.runner.value
                _ = self.state.withLock { $0.retired.removeValue(forKey: id) }
            }
        }
    }

    /// Why a connection failed, in PostgreSQL's words where it gave them; never the password.
    static func summary(of error: any Error) -> String {
        if let error = error as? PSQLError {
            if let message = error.serverInfo?[.message] {
                let state = error.serverInfo?[.sqlState].map { "\($0) " } ?? ""
                return state + message
            }
            if let underlying = error.underlying { return PostgresReach.words(for: underlying).0 }
            return "\(error.code)"
        }
        return (error as? any StoreConnectionFailure)?.summary ?? "\(error)"
    }

    // MARK: - Leases with a deadline

    /// `leasing(within:outOfReach:_:)` with this pool's waits: `leaseWait`, or `outageLeaseWait`
    /// once the database is known to be out of reach; a wait past `suspicion` starts the probe.
    private func leasing<Result: Sendable>(
        _ work: @escaping @Sendable (_ leased: @Sendable () throws -> Void) async throws -> Result
    ) async throws -> Result {
        try await Self.leasing(
            within: Self.leaseWait, outOfReach: { [self] in isOutOfReach },
            suspect: { [self] in suspect() }, work)
    }

    /// Runs `work`, which must call `leased()` as soon as it holds a connection; if it has not
    /// within `wait` (or `outageLeaseWait`, while `outOfReach()` says so), the lease is cancelled
    /// and `LeaseTimedOut` thrown. After `suspicion`, `suspect()` is called once. Once `leased()`
    /// has returned, the work runs to its end.
    static func leasing<Result: Sendable>(
        within wait: Duration, outOfReach: @escaping @Sendable () -> Bool, suspect: @escaping @Sendable () -> Void = {},
        _ work: @escaping @Sendable (_ leased: @Sendable () throws -> Void) async throws -> Result
    ) async throws -> Result {
        let lease = LeaseRace()
        let started = ContinuousClock.now
        return try await withThrowingTaskGroup(of: Result?.self) { group in
            group.addTask {
                try await work {
                    guard lease.take() else { throw LeaseTimedOut(wait: ContinuousClock.now - started) }
                }
            }
            group.addTask {
                var suspected = false
                while !Task.isCancelled {
                    try? await Task.sleep(for: .milliseconds(100))
                    // A caller that is cancelled has its answer already: no outage to report.
                    guard !Task.isCancelled, !lease.isTaken else { return nil }
                    let waited = ContinuousClock.now - started
                    if waited >= suspicion, !suspected {
                        suspected = true
                        suspect()
                    }
                    if waited >= wait || (waited >= outageLeaseWait && outOfReach()) {
                        if lease.expire() { throw LeaseTimedOut(wait: waited) }
                        return nil
                    }
                }
                return nil
            }
            while let next = try await group.next() {
                if let value = next {
                    group.cancelAll()
                    return value
                }
            }
            throw LeaseTimedOut(wait: ContinuousClock.now - started)
        }
    }
}

/// Who wins between a connection and the deadline: whichever comes first, exactly once.
private final class LeaseRace: Sendable {
    private static let waiting = 0, leased = 1, expired = 2
    private let state = Atomic<Int>(LeaseRace.waiting)

    /// The connection came: true unless the deadline passed first.
    func take() -> Bool {
        state.compareExchange(expected: Self.waiting, desired: Self.leased, ordering: .acquiringAndReleasing).exchanged
    }

    /// Whether the connection came.
    var isTaken: Bool {
        state.load(ordering: .acquiring) == Self.leased
    }

    /// The deadline passed: true unless the connection came first.
    func expire() -> Bool {
        state.compareExchange(expected: Self.waiting, desired: Self.expired, ordering: .acquiringAndReleasing).exchanged
    }
}

/// Whether a body ended, for the watch that may give it up.
private final class FinishFlag: Sendable {
    private let finished = Atomic<Bool>(false)
    func set() { finished.store(true, ordering: .releasing) }
    var isSet: Bool { finished.load(ordering: .acquiring) }
}

/// A request's work on one connection ran past `DatabasePool.statementDeadline`: the network
/// may be cut without a word. Its connection was closed; a commit may have been under way, so
/// it may have written.
public struct StatementTimedOut: StoreConnectionFailure, CustomStringConvertible {
    public var deadline: Duration
    public var meansUnavailable: Bool { false }
    public var summary: String { "a statement ran past \(deadline); its connection was closed" }
    public var description: String { summary }
}

/// The connection closed under a statement that then never ended: it was never sent (see
/// `DatabasePool.watched`), and nothing was written.
public struct ConnectionLost: StoreConnectionFailure, CustomStringConvertible {
    public var meansUnavailable: Bool { true }
    public var summary: String { "the connection to PostgreSQL closed under a statement" }
    public var description: String { summary }
}

/// No connection to PostgreSQL came within the wait: the database is out of reach (or every
/// connection busy for seconds). Nothing was written.
public struct LeaseTimedOut: StoreConnectionFailure, CustomStringConvertible {
    public var wait: Duration
    public var meansUnavailable: Bool { true }
    public var summary: String { "no connection to PostgreSQL within \(RegistryService.seconds(wait)) seconds" }
    public var description: String { summary }
}
