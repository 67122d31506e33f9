import Dispatch
import Synchronization

/// Runs async code to its end on the thread that calls ``run(_:)``, for the shared rules that are
/// written async (PostgreSQL answers over the network) inside a GRDB write, whose body is
/// synchronous and whose `Database` may be used only on the writer's thread.
///
/// The body's task prefers this executor, so every job of it, its start and any resumption,
/// comes here, and `run` runs them on its own thread until the body has returned. Over a driver
/// that never suspends (SQLite's), that is one job and no thread hop.
final class WriterThreadExecutor: TaskExecutor {
    private let jobs = Mutex<[UnownedJob]>([])
    /// Signalled once per job enqueued.
    private let ready = DispatchSemaphore(value: 0)

    private init() {}

    func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        jobs.withLock { $0.append(job) }
        ready.signal()
    }

    /// Runs `body` on this thread and returns what it returned, or throws what it threw.
    static func run<T: Sendable>(_ body: sending @escaping () async throws -> T) throws -> T {
        let executor = WriterThreadExecutor()
        let outcome = Mutex<Result<T, any Error>?>(nil)
        _ = Task(executorPreference: executor) {
            let result: Result<T, any Error>
            do { result = .success(try await body()) } catch { result = .failure(error) }
            outcome.withLock { $0 = result }
        }
        while true {
            executor.ready.wait()
            let job = executor.jobs.withLock { $0.removeFirst() }
            job.runSynchronously(on: executor.asUnownedTaskExecutor())
            if let result = outcome.withLock({ $0 }) { return try result.get() }
        }
    }
}
