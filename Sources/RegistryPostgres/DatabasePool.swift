import Logging
import PostgresNIO
import Registry
import Synchronization

/// The store's connections to PostgreSQL: postgres-nio's pool, with the bounds a server behind a
/// load balancer needs when the database goes away and comes back.
///
/// - A request waits at most `leaseWait` for a connection (`outageLeaseWait` while the database is
///   known to be out of reach), then fails with `LeaseTimedOut`, which the API answers 503 with
///   `Retry-After`. postgres-nio alone would hold it for a minute before its circuit breaker trips.
/// - The first failure that means "out of reach" starts a probe: a fresh connection every 500 ms,
///   outside the pool, whose error is kept as the outage's cause. Once one succeeds, the pool is
///   asked for a connection; if it cannot give one within a second (it backs off up to a minute
///   between attempts after a long outage), a new pool takes its place, and the old one is closed
///   a minute later, when whatever it still runs has ended. So requests succeed again within a
///   second or two of the database's return, however long it was gone.
public final class DatabasePool: Sendable {
    /// How long a request waits for a connection while the database answers: twenty busy
    /// connections free one in milliseconds, so a longer wait means the database is gone.
    static let leaseWait = Duration.seconds(3)
    /// How long a request waits while the probe has not yet seen the database answer again.
    static let outageLeaseWait = Duration.seconds(1)
    /// A TCP connection and PostgreSQL's start-up must be done within this.
    static let connectTimeout = Duration.seconds(2)
    static let probeInterval = Duration.milliseconds(500)
    /// How often a statement's connection is checked while the statement runs, and how long a
    /// statement may go on after its connection closed.
    static let closedConnectionCheck = Duration.milliseconds(500)
    /// How long a replaced pool keeps running what was leased from it before it is closed.
    static let retiredPoolGrace = Duration.seconds(60)

    private struct Pool: Sendable {
        let client: PostgresClient
        let runner: Task<Void, Never>
        /// Done once `run()` has begun: a connection leased before that logs postgres-nio's warning.
        let starting: Task<Void, Never>
    }

    private struct Outage {
        var since: ContinuousClock.Instant
        var cause: String
    }

    private struct State {
        var pool: Pool
        var retired: [Task<Void, Never>] = []
        var outage: Outage?
        var probe: Task<Void, Never>?
        var stopped = false
    }

    private let state: Mutex<State>
    private let configuration: PostgresClient.Configuration
    /// The same place and credentials, for the probe's connection of its own.
    private let probeConfiguration: PostgresConnection.Configuration
    private let logger: Logger

    init(_ location: PostgresLocation, maximumConnections: Int?, logger: Logger) throws(PostgresLocationError) {
        var configuration = try location.configuration()
        configuration.options.connectTimeout = Self.connectTimeout
        if let maximumConnections { configuration.options.maximumConnections = maximumConnections }
        self.configuration = configuration
        var probeConfiguration = try location.connectionConfiguration()
        probeConfiguration.options.connectTimeout = .init(Self.connectTimeout)
        self.probeConfiguration = probeConfiguration
        self.logger = logger
        state = Mutex(State(pool: Self.start(configuration, logger: logger)))
    }

    private static func start(_ configuration: PostgresClient.Configuration, logger: Logger) -> Pool {
        let client = PostgresClient(configuration: configuration, backgroundLogger: logger)
        let (started, signal) = AsyncStream.makeStream(of: Void.self)
        let runner = Task {
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
        state.withLock { $0.outage != nil }
    }

    /// Runs `body` with a connection of the pool; waits at most `leaseWait` for one.
    /// - Throws: `LeaseTimedOut` when no connection came in time, or what `body` throws.
    public func withConnection<Result: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        let (pool, wait) = state.withLock { ($0.pool, $0.outage == nil ? Self.leaseWait : Self.outageLeaseWait) }
        await pool.starting.value
        do {
            return try await Self.leasing(within: wait) { leased in
                try await pool.client.withConnection { connection in
                    try leased()
                    return try await Self.watched(connection, body)
                }
            }
        } catch let error as any StoreConnectionFailure where error.meansUnavailable {
            noteOutOfReach(error)
            throw error
        }
    }

    /// Runs `body` on `connection`, abandoned if the connection closes under it and the body has
    /// not ended a second later.
    ///
    /// postgres-nio hands a statement to the connection's channel without a promise for the
    /// write: on a channel that closed a moment before (PostgreSQL restarting, say, ends every
    /// session), the statement is dropped and its answer never comes. A statement so dropped was
    /// never sent, and PostgreSQL rolled back the transaction it belonged to when it ended the
    /// session, so `ConnectionLost` means nothing was written.
    static func watched<Result: Sendable>(
        _ connection: PostgresConnection, _ body: @escaping @Sendable (PostgresConnection) async throws -> Result
    ) async throws -> Result {
        guard !connection.isClosed else { throw ConnectionLost() }
        return try await abandoning({ try await body(connection) }) {
            while !Task.isCancelled {
                try? await Task.sleep(for: Self.closedConnectionCheck)
                if connection.isClosed {
                    try? await Task.sleep(for: Self.closedConnectionCheck)
                    return Task.isCancelled ? nil : ConnectionLost()
                }
            }
            return nil
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
            return (state.pool, state.retired, state.probe)
        }
        probe?.cancel()
        for task in retired { task.cancel() }
        pool.runner.cancel()
        await pool.runner.value
    }

    // MARK: - Out of reach, and back

    /// Marks the database out of reach and starts the probe, unless it already runs.
    private func noteOutOfReach(_ error: any StoreConnectionFailure) {
        let starts = state.withLock { state -> Bool in
            guard state.outage == nil, !state.stopped else { return false }
            state.outage = Outage(since: .now, cause: error.summary)
            return true
        }
        guard starts else { return }
        logger.warning(
            "PostgreSQL cannot be reached: requests that need it are answered 503 until it answers again",
            metadata: ["cause": "\(error.summary)"])
        let probe = Task { await self.probeUntilReachable() }
        state.withLock { state in
            if state.stopped { probe.cancel() } else { state.probe = probe }
        }
    }

    /// Connects every second until PostgreSQL answers; then makes sure the pool does too.
    private func probeUntilReachable() async {
        while !Task.isCancelled {
            do {
                try await probe()
                let pool = state.withLock { $0.pool }
                let poolAnswers: Bool
                do {
                    try await Self.leasing(within: .seconds(1)) { leased -> Void in
                        try await pool.client.withConnection { connection in
                            try leased()
                            try await connection.run("SELECT 1")
                        }
                    }
                    poolAnswers = true
                } catch {
                    poolAnswers = false
                }
                if !poolAnswers { replacePool() }
                let outage = state.withLock { state in
                    defer {
                        state.outage = nil
                        state.probe = nil
                    }
                    return state.outage
                }
                logger.notice(
                    "PostgreSQL answers again",
                    metadata: [
                        "after": "\(outage.map { ContinuousClock.now - $0.since } ?? .zero)",
                        "pool": "\(poolAnswers ? "kept" : "replaced")",
                    ])
                return
            } catch {
                let cause = Self.summary(of: error)
                state.withLock { $0.outage?.cause = cause }
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
        let fresh = Self.start(configuration, logger: logger)
        state.withLock { state in
            let old = state.pool
            state.pool = fresh
            state.retired.append(
                Task {
                    try? await Task.sleep(for: Self.retiredPoolGrace)
                    old.runner.cancel()
                })
        }
    }

    /// Why a connection failed, in PostgreSQL's words where it gave them; never the password.
    static func summary(of error: any Error) -> String {
        if let error = error as? PSQLError {
            if let message = error.serverInfo?[.message] {
                let state = error.serverInfo?[.sqlState].map { "\($0) " } ?? ""
                return state + message
            }
            if let underlying = error.underlying { return "\(underlying)" }
            return "\(error.code)"
        }
        return (error as? any StoreConnectionFailure)?.summary ?? "\(error)"
    }

    // MARK: - Leases with a deadline

    /// Runs `work`, which must call `leased()` as soon as it holds a connection; if it has not
    /// within `wait`, the lease is cancelled and `LeaseTimedOut` thrown. Once `leased()` has
    /// returned, the work runs to its end, however long it takes (an import, a `COPY`).
    static func leasing<Result: Sendable>(
        within wait: Duration, _ work: @escaping @Sendable (_ leased: @Sendable () throws -> Void) async throws -> Result
    ) async throws -> Result {
        let lease = LeaseRace()
        return try await withThrowingTaskGroup(of: Result?.self) { group in
            group.addTask {
                try await work {
                    guard lease.take() else { throw LeaseTimedOut(wait: wait) }
                }
            }
            group.addTask {
                try? await Task.sleep(for: wait)
                if lease.expire() { throw LeaseTimedOut(wait: wait) }
                return nil
            }
            while let next = try await group.next() {
                if let value = next {
                    group.cancelAll()
                    return value
                }
            }
            throw LeaseTimedOut(wait: wait)
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

    /// The deadline passed: true unless the connection came first.
    func expire() -> Bool {
        state.compareExchange(expected: Self.waiting, desired: Self.expired, ordering: .acquiringAndReleasing).exchanged
    }
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
    public var summary: String { "no connection to PostgreSQL within \(wait)" }
    public var description: String { summary }
}
