import AudienceEngine
import GRDB
import Metrics
import Registry
import ServiceLifecycle
import Synchronization

/// Runs each request's writes in a savepoint of a shared transaction, committing many requests
/// with one commit (group commit).
///
/// SQLite has one writer, and a commit costs a WAL write; one transaction per request caps the
/// server at a few thousand writes a second. Requests that arrive while a commit is under way
/// wait for the next one, which carries them all. Each request still gets all-or-nothing: its
/// savepoint is rolled back when it throws, without touching the others, and it hears of success
/// only after the shared commit has returned.
///
/// In `serve` the writer is a peer of the service group: its own task commits batch after batch
/// while requests queue, and once shutdown has begun, the requests still writing commit for
/// themselves. Without it (commands, tests), the first request to find nobody committing commits
/// for everyone queued, its own request included, then hands the work to the first request still
/// waiting; each such commit runs in a task of its own, which the committing request awaits, so
/// cancelling that request (a reset stream, a closed session) never fails the others' writes.
final class GroupCommitWriter: Service, CustomStringConvertible {
    private struct Job: Sendable {
        /// Runs the request's body in a savepoint; returns the feed entries it wrote and what
        /// delivers its outcome to its caller after commit.
        let run: @Sendable (Database) -> (entries: [FeedEntry], finish: @Sendable ([FeedEntry]) -> Void)
        /// Delivers the commit's error.
        let fail: @Sendable (any Error) -> Void
        /// Wakes the job's caller to commit for everyone.
        let lead: @Sendable () -> Void
    }

    private struct Queue {
        var pending: [Job] = []
        /// Whether some request is committing for everyone.
        var committing = false
        /// Rings the writer's own task, while it runs.
        var service: AsyncStream<Void>.Continuation?
        var lastPrune = ContinuousClock.now
    }

    private let writer: any DatabaseWriter
    private let queue = Mutex(Queue())
    /// Entries of the change feed kept for followers.
    private let feedRetention: Int
    /// Rung after every commit.
    private let doorbell: FeedDoorbell
    init(_ writer: any DatabaseWriter, feedRetention: Int, doorbell: FeedDoorbell) {
        self.writer = writer
        self.feedRetention = feedRetention
        self.doorbell = doorbell
    }

    var description: String { "GroupCommitWriter" }

    /// Commits what requests queue until graceful shutdown; then what is left, and from then on
    /// the requests commit for themselves.
    func run() async throws {
        let (rings, ring) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let queued = queue.withLock { queue in
            queue.service = ring
            return !queue.pending.isEmpty
        }
        if queued { ring.yield() }
        await withGracefulShutdownHandler {
            for await _ in rings { await commitQueued() }
        } onGracefulShutdown: {
            ring.finish()
        }
        queue.withLock { $0.service = nil }
        await commitQueued()
    }

    /// Commits batch after batch until nothing is queued.
    private func commitQueued() async {
        while true {
            let (jobs, prune) = takeQueued()
            if jobs.isEmpty { return }
            await commit(jobs, prune: prune)
        }
    }

    /// Everything queued, and whether this commit should prune the feed.
    private func takeQueued() -> (jobs: [Job], prune: Bool) {
        queue.withLock { queue in
            let jobs = queue.pending
            queue.pending = []
            // Pruning is a range delete on the primary key; once a second is plenty.
            let prune = !jobs.isEmpty && ContinuousClock.now - queue.lastPrune > .seconds(1)
            if prune { queue.lastPrune = .now }
            return (jobs, prune)
        }
    }

    /// Runs `body` as one all-or-nothing unit and returns its value, with the feed entries it
    /// wrote, once it is committed.
    func write<T: Sendable>(_ body: @escaping @Sendable (Database, ChangeLog) throws -> T) async throws -> Committed<T> {
        let waiter = Waiter<T>()
        let job = Job(
            run: { db in
                do {
                    let (result, entries) = try Self.inSavepoint(db) { db in
                        let log = ChangeLog()
                        let result = try body(db, log)
                        return (result, try ChangeFeedSQL.insert(log.changes, db, now: EpochMilliseconds.now()))
                    }
                    return (entries, { waiter.finish(.success(Committed(result, changes: $0))) })
                } catch {
                    return ([], { _ in waiter.finish(.failure(error)) })
                }
            },
            fail: { waiter.finish(.failure($0)) },
            lead: { waiter.lead() })
        let leads = queue.withLock { queue in
            queue.pending.append(job)
            if let service = queue.service {
                service.yield()
                return false
            }
            guard !queue.committing else { return false }
            queue.committing = true
            return true
        }
        if leads { await commitForEveryone() }
        while true {
            switch await waiter.next() {
            case .done(let result): return try result.get()
            case .lead: await commitForEveryone()
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

    /// Commits what is queued, then hands the work to the first request still waiting, if any.
    private func commitForEveryone() async {
        let (jobs, prune) = takeQueued()
        if !jobs.isEmpty {
            await Task { await self.commit(jobs, prune: prune) }.value
        }
        // Only a request may take a waiting request's job, and only one commits at a time, so the
        // job led next is still waiting: its caller hears `lead` before its outcome. While the
        // writer's own task runs, it takes what waits instead.
        let next = queue.withLock { queue -> Job? in
            guard queue.service == nil, let first = queue.pending.first else {
                queue.committing = false
                return nil
            }
            return first
        }
        next?.lead()
    }

    private func commit(_ jobs: [Job], prune: Bool) async {
        Recorder(label: "fcm_registry_group_commit_batch_size").record(jobs.count)
        do {
            let retention = feedRetention
            let outcomes = try await writer.write { db in
                let outcomes = jobs.map { $0.run(db) }
                if prune { try ChangeFeedSQL.prune(db, keeping: retention) }
                return outcomes
            }
            doorbell.ring()
            outcomes.forEach { $0.finish($0.entries) }
        } catch let error as DatabaseError
            where error.resultCode == .SQLITE_BUSY || error.resultCode == .SQLITE_LOCKED
        {
            jobs.forEach { $0.fail(RegistryError.storeBusy) }
        } catch {
            jobs.forEach { $0.fail(error) }
        }
    }
}

/// Where a request waits for its commit, or to be asked to commit for everyone.
private final class Waiter<T: Sendable>: Sendable {
    enum Step: Sendable {
        case done(Result<Committed<T>, any Error>)
        case lead
    }

    private struct State {
        var steps: [Step] = []
        var continuation: CheckedContinuation<Step, Never>?
    }

    private let state = Mutex(State())

    func finish(_ result: Result<Committed<T>, any Error>) { deliver(.done(result)) }

    func lead() { deliver(.lead) }

    private func deliver(_ step: Step) {
        let waiting = state.withLock { state -> CheckedContinuation<Step, Never>? in
            guard let continuation = state.continuation else {
                state.steps.append(step)
                return nil
            }
            state.continuation = nil
            return continuation
        }
        waiting?.resume(returning: step)
    }

    /// The next step, once there is one.
    func next() async -> Step {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> Step? in
                guard state.steps.isEmpty else { return state.steps.removeFirst() }
                state.continuation = continuation
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }
}
