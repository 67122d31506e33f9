import GRDB
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
        /// Runs the request's body in a savepoint; returns what it changed for the audience index
        /// and what resumes its caller after commit.
        let run: @Sendable (Database) -> (changes: [AudienceChange], resume: @Sendable () -> Void)
        /// Resumes the caller with the commit's error.
        let fail: @Sendable (any Error) -> Void
    }

    private struct Queue {
        var pending: [Job] = []
        var draining = false
    }

    private let writer: any DatabaseWriter
    private let queue = Mutex(Queue())
    /// Called with each commit's changes, after the commit and before any caller resumes.
    private let committed: @Sendable ([AudienceChange]) -> Void

    init(_ writer: any DatabaseWriter, committed: @escaping @Sendable ([AudienceChange]) -> Void) {
        self.writer = writer
        self.committed = committed
    }

    /// Runs `body` as one all-or-nothing unit and returns its value once it is committed.
    func write<T: Sendable>(_ body: @escaping @Sendable (Database, ChangeLog) throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            let job = Job(
                run: { db in
                    let log = ChangeLog()
                    do {
                        let result = try Self.inSavepoint(db) { try body($0, log) }
                        return (log.changes, { continuation.resume(returning: result) })
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
            let jobs = queue.withLock { queue in
                let jobs = queue.pending
                queue.pending = []
                if jobs.isEmpty { queue.draining = false }
                return jobs
            }
            if jobs.isEmpty { return }
            do {
                let outcomes = try await writer.write { db in jobs.map { $0.run(db) } }
                committed(outcomes.flatMap(\.changes))
                outcomes.forEach { $0.resume() }
            } catch {
                jobs.forEach { $0.fail(error) }
            }
        }
    }
}

/// What one request's writes changed, collected inside its savepoint and kept only if it commits.
final class ChangeLog {
    private(set) var changes: [AudienceChange] = []

    func record(_ change: AudienceChange) {
        changes.append(change)
    }
}
