import Audience
import GRDB
import Metrics
import Registry
import Synchronization

/// Runs each request's writes in a savepoint of a shared transaction, committing many requests
/// with one commit (group commit).
///
/// SQLite has one writer, and a commit costs a WAL write; one transaction per request caps the
/// server at a few thousand writes a second. Requests that arrive while a commit is under way
/// wait for the next one, which carries them all. Each request still gets all-or-nothing: its
/// savepoint is rolled back when it throws, without touching the others, and it hears of success
/// only after the shared commit has returned.
final class GroupCommitWriter: Sendable {
    private struct Job: Sendable {
        /// Runs the request's body in a savepoint; returns the feed entries it wrote and what
        /// resumes its caller after commit.
        let run: @Sendable (Database) -> (entries: [FeedEntry], resume: @Sendable () -> Void)
        /// Resumes the caller with the commit's error.
        let fail: @Sendable (any Error) -> Void
    }

    private struct Queue {
        var pending: [Job] = []
        var draining = false
        var listener: (any FeedListener)?
        var lastPrune = ContinuousClock.now
    }

    private let writer: any DatabaseWriter
    private let queue = Mutex(Queue())
    /// Entries of the change feed kept for followers.
    private let feedRetention: Int

    init(_ writer: any DatabaseWriter, feedRetention: Int) {
        self.writer = writer
        self.feedRetention = feedRetention
    }

    /// Makes `listener` hear of each commit (see `RegistryStore.attach`).
    func attach(_ listener: any FeedListener) {
        queue.withLock { $0.listener = listener }
    }

    /// Runs `body` as one all-or-nothing unit and returns its value once it is committed.
    func write<T: Sendable>(_ body: @escaping @Sendable (Database, ChangeLog) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let job = Job(
                run: { db in
                    do {
                        let (result, entries) = try Self.inSavepoint(db) { db in
                            let log = ChangeLog()
                            let result = try body(db, log)
                            return (result, try ChangeFeedSQL.insert(log.changes, db, now: Clock.now()))
                        }
                        return (entries, { continuation.resume(returning: result) })
                    } catch {
                        return ([], { continuation.resume(throwing: error) })
                    }
                },
                fail: { continuation.resume(throwing: $0) })
            let startsDrain = queue.withLock { queue in
                queue.pending.append(job)
                guard !queue.draining else { return false }
                queue.draining = true
                return true
            }
            if startsDrain {
                Task { await self.drain() }
            }
        }
    }

    /// Runs `body` in a savepoint: kept when it returns, rolled back (alone) when it throws.
    /// The statements are cached: a savepoint per request must cost next to nothing.
    private static func inSavepoint<T>(_ db: Database, _ body: (Database) throws -> T) throws -> T {
        try db.cachedStatement(sql: "SAVEPOINT request").execute()
        do {
            let value = try body(db)
            try db.cachedStatement(sql: "RELEASE SAVEPOINT request").execute()
            return value
        } catch {
            try db.cachedStatement(sql: "ROLLBACK TO SAVEPOINT request").execute()
            try db.cachedStatement(sql: "RELEASE SAVEPOINT request").execute()
            throw error
        }
    }

    /// Commits batches until no request is waiting.
    private func drain() async {
        while true {
            let (jobs, listener, prune) = queue.withLock { queue in
                let jobs = queue.pending
                queue.pending = []
                if jobs.isEmpty { queue.draining = false }
                // Pruning is a range delete on the primary key; once a second is plenty.
                let prune = ContinuousClock.now - queue.lastPrune > .seconds(1)
                if prune { queue.lastPrune = .now }
                return (jobs, queue.listener, prune)
            }
            if jobs.isEmpty { return }
            Recorder(label: "fcm_registry_group_commit_batch_size").record(jobs.count)
            do {
                let retention = feedRetention
                let (others, outcomes) = try await writer.write { db in
                    // What other processes committed since the listener's position, read under
                    // the write lock: with this batch's own entries it is a gapless stretch.
                    let others = try listener.map { try ChangeFeedSQL.read(db, after: $0.position, limit: .max) }
                    let outcomes = jobs.map { $0.run(db) }
                    if prune { try ChangeFeedSQL.prune(db, keeping: retention) }
                    return (others, outcomes)
                }
                if let listener, let others {
                    listener.apply(
                        FeedRead(entries: others.entries + outcomes.flatMap(\.entries), truncated: others.truncated))
                }
                outcomes.forEach { $0.resume() }
            } catch let error as DatabaseError
                where error.resultCode == .SQLITE_BUSY || error.resultCode == .SQLITE_LOCKED
            {
                jobs.forEach { $0.fail(RegistryError.storeBusy) }
            } catch {
                jobs.forEach { $0.fail(error) }
            }
        }
    }
}

