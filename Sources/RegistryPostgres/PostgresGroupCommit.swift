import AudienceEngine
import Foundation
import Logging
import Metrics
import PostgresNIO
import Registry
import Synchronization

/// Group commit on PostgreSQL: writes that change an audience share transactions, each request
/// in a savepoint of its own.
///
/// Every such write ends by taking the change feed's counter row (`PostgresFeed`), which it holds
/// until it has committed: one transaction per request would cap every server on the database
/// together at one commit (one WAL flush) at a time, a few hundred a second. Requests that arrive
/// while a commit is under way are carried by the next one instead. Each keeps all-or-nothing:
/// its savepoint is rolled back when it throws, without touching the others, and it hears of
/// success only after the shared commit. Should the shared transaction fail (a deadlock with
/// another server's batch, which row locks taken in a fixed order per request do not rule out
/// across requests), each of its requests runs again in a transaction of its own.
///
/// Commits run on a task of their own, never a request's, so that a cancelled request (a reset
/// stream) cannot fail the others' writes; one at a time per server, since two batches of one
/// server would lock the same rows in different orders.
final class PostgresGroupCommit: Sendable {
    /// One request's write.
    private struct Job: Sendable {
        /// Runs the request's body in a savepoint of the shared transaction.
        let run: @Sendable (PostgresConnection) async throws -> Outcome
        /// Runs the request's body in a transaction of its own, and delivers the outcome.
        let alone: @Sendable () async -> Void
    }

    enum Outcome: Sendable {
        /// Kept: its changes go to the feed, and `finish` delivers the entries after commit.
        case kept(changes: [AudienceChange], finish: @Sendable ([FeedEntry]) -> Void)
        /// Rolled back alone: `finish` delivers its error after commit.
        case failed(finish: @Sendable () -> Void)
        /// Lost a deadlock or a serialization race: to run again in a transaction of its own.
        case retry
    }

    private struct Queue {
        var pending: [Job] = []
        /// Whether the committing task runs.
        var leading = false
    }

    private let client: PostgresClient
    private let logger: Logger
    private let retention: Int
    private let queue = Mutex(Queue())

    init(client: PostgresClient, logger: Logger, retention: Int) {
        self.client = client
        self.logger = logger
        self.retention = retention
    }

    /// Runs `body` as one all-or-nothing write with the feed entries of what it recorded, and
    /// returns once it is committed.
    func write<Value: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection, ChangeLog) async throws -> Value,
        alone: @escaping @Sendable () async throws -> Committed<Value>,
        mapError: @escaping @Sendable (any Error) -> any Error
    ) async throws -> Committed<Value> {
        try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Committed<Value>, any Error>) in
            let job = Job(
                run: { connection in
                    try await connection.run("SAVEPOINT request")
                    do {
                        let log = ChangeLog()
                        let value = try await body(connection, log)
                        try await connection.run("RELEASE SAVEPOINT request")
                        return .kept(changes: log.changes) { continuation.resume(returning: Committed(value, changes: $0)) }
                    } catch {
                        // Rolled back alone; a failure here breaks the shared transaction, which then fails.
                        try await connection.run("ROLLBACK TO SAVEPOINT request")
                        try await connection.run("RELEASE SAVEPOINT request")
                        if let psql = error as? PSQLError, ["40P01", "40001"].contains(psql.serverInfo?[.sqlState]) {
                            return .retry
                        }
                        return .failed { continuation.resume(throwing: mapError(error)) }
                    }
                },
                alone: {
                    do {
                        continuation.resume(returning: try await alone())
                    } catch {
                        continuation.resume(throwing: error)
                    }
                })
            let leads = queue.withLock { queue in
                queue.pending.append(job)
                guard !queue.leading else { return false }
                queue.leading = true
                return true
            }
            if leads { Task { await self.lead() } }
        }
    }

    /// Commits batch after batch until nothing is queued.
    private func lead() async {
        while true {
            let jobs = queue.withLock { queue in
                let jobs = queue.pending
                queue.pending = []
                if jobs.isEmpty { queue.leading = false }
                return jobs
            }
            if jobs.isEmpty { return }
            await commit(jobs)
        }
    }

    private func commit(_ jobs: [Job]) async {
        Recorder(label: "fcm_registry_group_commit_batch_size").record(jobs.count)
        let retention = retention
        do {
            let (outcomes, entries) = try await client.withTransaction(logger: logger) { connection in
                var outcomes: [Outcome] = []
                for job in jobs { outcomes.append(try await job.run(connection)) }
                var changes: [AudienceChange] = []
                for case .kept(let kept, _) in outcomes { changes += kept }
                let entries = try await PostgresFeed.insert(
                    changes, connection, now: EpochMilliseconds.now(), retention: retention)
                return (outcomes, entries)
            }
            var next = 0
            for (job, outcome) in zip(jobs, outcomes) {
                switch outcome {
                case .kept(let changes, let finish):
                    finish(Array(entries[next..<next + changes.count]))
                    next += changes.count
                case .failed(let finish): finish()
                case .retry: await job.alone()
                }
            }
        } catch {
            // The shared transaction failed: each request on its own, its own outcome.
            if jobs.count > 1 {
                logger.debug("group commit failed, its requests run alone", metadata: ["error": "\(error)"])
            }
            for job in jobs { await job.alone() }
        }
    }
}
