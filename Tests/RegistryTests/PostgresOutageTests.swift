import Foundation
import Logging
import PostgresNIO
import Registry
import RegistryPostgres
import TestBackends
import Testing

/// What the store does when PostgreSQL goes away: nothing waits for ever, and a request learns
/// within seconds. The restart and the stop of a whole cluster under two servers are in
/// `Tests/postgres/outage.py`.
@Suite("PostgreSQL: connections lost and a database out of reach", .enabled(if: TestPostgres.available, TestPostgres.skipped))
struct PostgresOutageTests {
    @Test("A statement on a connection PostgreSQL has ended fails within seconds; it is not awaited for ever")
    func statementOnAnEndedConnection() async throws {
        try await TestPostgres.withStore { store in
            let admin = try PostgresStore(store.location, logger: Logger(label: "test"))
            defer { Task { await admin.close() } }
            let started = ContinuousClock.now
            let failure = await #expect(throws: (any Error).self) {
                try await withDeadline(.seconds(30), "the test's statement") {
                    try await store.database.withConnection { connection in
                        let pid = try await connection.query("SELECT pg_backend_pid()", logger: Logger(label: "test"))
                            .collect()[0].decode(Int32.self)
                        _ = try await admin.database.query("SELECT pg_terminate_backend(\(pid))")
                        try await Task.sleep(for: .milliseconds(300))
                        _ = try await connection.query("SELECT 1", logger: Logger(label: "test")).collect()
                    }
                }
            }
            #expect(!(failure is DeadlineExceeded), "the statement was waited for until the test's own deadline")
            #expect((failure as? any StoreConnectionFailure)?.meansUnavailable == true, "\(String(describing: failure))")
            // Only a hang fails this (the test's own deadline, 30 s): a loaded machine is slow.
            #expect(ContinuousClock.now - started < .seconds(25))
        }
    }

    @Test("Nothing listening: a request is answered unavailable, not held for postgres-nio's minute")
    func nothingListening() async throws {
        let port = unusedLoopbackPort()
        let store = try PostgresStore(
            try PostgresLocation(parsing: "postgres://registry:secret@127.0.0.1:\(port)/registry?sslmode=disable"),
            logger: Self.quiet)
        let started = ContinuousClock.now
        let first = await #expect(throws: (any Error).self) { try await store.ping() }
        #expect((first as? any StoreConnectionFailure)?.meansUnavailable == true, "\(String(describing: first))")
        // postgres-nio alone answers after its circuit breaker, a minute; on a loaded machine the
        // bound is the probe's connect timeout, not the lease's 10 s. Only that minute fails this:
        // the whole suite starting at once on two cores has held the answer for 50 s.
        #expect(ContinuousClock.now - started < .seconds(58))
        #expect(store.database.isOutOfReach)
        await store.close()
    }

    /// postgres-nio logs every refused connection at `info`.
    static let quiet: Logger = {
        var logger = Logger(label: "test")
        logger.logLevel = .warning
        return logger
    }()
}

/// What a command or a starting server says when its URL cannot open the database.
@Suite("PostgreSQL: a URL that cannot connect fails in seconds, with its cause", .enabled(if: TestPostgres.available, TestPostgres.skipped))
struct PostgresConnectTests {
    static func failure(_ url: String, patience: Duration = .seconds(10)) async throws -> (String, Duration) {
        let store = try PostgresStore(try PostgresLocation(parsing: url), logger: PostgresOutageTests.quiet)
        let started = ContinuousClock.now
        var said = ""
        do {
            try await store.connect(patience: patience)
        } catch {
            said = "\(error)"
        }
        await store.close()
        return (said, ContinuousClock.now - started)
    }

    @Test("A wrong password fails at once, in PostgreSQL's words, without the password")
    func wrongPassword() async throws {
        var location = try PostgresLocation(parsing: try #require(TestPostgres.url))
        location.password = "wrong-password-for-test"
        let url = "postgres://\(location.username):wrong-password-for-test@\(location.host):\(location.port)/\(location.database)?sslmode=disable"
        let (said, took) = try await Self.failure(url)
        #expect(said.contains("28P01"), "\(said)")
        #expect(said.contains("password authentication failed"), "\(said)")
        #expect(!said.contains("wrong-password-for-test"))
        #expect(took < .seconds(60), "no retrying for the 67 s postgres-nio took")
    }

    @Test("sslmode=verify-full against a server without TLS says so at once")
    func noTLS() async throws {
        let location = try PostgresLocation(parsing: try #require(TestPostgres.url))
        let url = "postgres://\(location.username):\(location.password ?? "")@\(location.host):\(location.port)/\(location.database)?sslmode=verify-full"
        let (said, took) = try await Self.failure(url)
        #expect(said == "the server does not offer TLS, and sslmode=verify-full requires it", "\(said)")
        #expect(took < .seconds(60), "no retrying for the 67 s postgres-nio took")
    }

    @Test("Nothing listening is tried again for the patience given, then names the refusal")
    func nothingListening() async throws {
        let port = unusedLoopbackPort()
        let (said, took) = try await Self.failure(
            "postgres://registry:x@127.0.0.1:\(port)/registry?sslmode=disable", patience: .seconds(2))
        #expect(said == "cannot reach PostgreSQL at 127.0.0.1:\(port): connection refused (tried for 2.0 seconds)")
        #expect(took >= .seconds(1) && took < .seconds(60), "not the 67 s postgres-nio took")
    }

    @Test("A host the resolver does not know fails at once, in the resolver's words")
    func unknownHost() async throws {
        // A long patience: an unknown host is not tried again, so it fails well before it, however
        // long a loaded machine's resolver takes to say no.
        let (said, took) = try await Self.failure(
            "postgres://registry:x@no-such-host.invalid:5432/registry", patience: .seconds(120))
        #expect(said.hasPrefix("cannot reach PostgreSQL at no-such-host.invalid:5432: unknown host ("), "\(said)")
        #expect(took < .seconds(120), "not tried again for the patience")
    }
}
