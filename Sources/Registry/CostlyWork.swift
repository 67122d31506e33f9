import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Work whose cost grows with its input (decoding and checking a condition, set algebra over an
/// audience), run on a thread of its own instead of the cooperative pool that answers every
/// other request. Each such job is bounded (conditions are at most 64 KiB and lint linearly), but
/// several at once could still occupy every pool thread; here they queue behind one another.
///
/// The thread also runs under Linux's idle scheduling policy (`SCHED_IDLE`): it gets the CPU when
/// no ordinary thread wants it, and a thread answering `GET /health` or a write that wakes up
/// takes the CPU from it at once. Under `nice 19` it still held a core until the scheduler's next
/// tick, which cost a stream of condition checks on a 2-core machine a fifth of the writes; under
/// the idle policy, a twentieth. When the machine is saturated with cheap requests, costly ones
/// wait for them.
public enum CostlyWork {
    private static let requests = WorkThread(name: "fcm-costly", priority: .idle)
    /// Takes the second half of a job split with ``inHalves(_:_:)``, at the same priority.
    private static let helper = WorkThread(name: "fcm-costly-half", priority: .idle)
    /// Long jobs no request waits for (writing a checkpoint), kept off the request thread too.
    private static let background = WorkThread(name: "fcm-background", priority: .nice(15))

    public static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            requests.submit { continuation.resume(with: Result(catching: body)) }
        }
    }

    public static func run<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            requests.submit { continuation.resume(returning: body()) }
        }
    }

    /// Runs `body` on a thread of its own that requests never wait behind.
    public static func runInBackground<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            background.submit { continuation.resume(with: Result(catching: body)) }
        }
    }

    /// `first` on the calling thread and `second` on the helper thread at once, for a job that
    /// splits in two (a count over millions of tokens). Called from costly work, so that both
    /// halves keep its priority; the helper runs one half at a time.
    public static func inHalves<A, B: Sendable>(_ first: () -> A, _ second: @escaping @Sendable () -> B) -> (A, B) {
        let half = HelperHalf<B>()
        helper.submit { half.finish(second()) }
        let a = first()
        return (a, half.wait())
    }
}

/// The helper's half of a split job: its result, handed over once.
private final class HelperHalf<Value: Sendable>: Sendable {
    private let result = Mutex<Value?>(nil)
    private let done = DispatchSemaphore(value: 0)

    func finish(_ value: Value) {
        result.withLock { $0 = value }
        done.signal()
    }

    func wait() -> Value {
        done.wait()
        return result.withLock { $0! }
    }
}

/// One long-lived thread running jobs in order, at a lowered priority.
private final class WorkThread: Sendable {
    enum Priority {
        /// Linux's `SCHED_IDLE`: only when nothing else wants the CPU.
        case idle
        /// A nice value for the thread, 1 (slightly lower) to 19 (lowest).
        case nice(Int32)
    }

    private let jobs = Mutex<[@Sendable () -> Void]>([])
    private let ready = DispatchSemaphore(value: 0)

    /// `name` is at most 15 bytes, what Linux keeps of a thread's name (shown by `top -H`, `ps -L`).
    init(name: String, priority: Priority) {
        let thread = Thread { [self] in
            #if canImport(Glibc)
                // Linux keeps a name, a policy and a nice value per thread; `/proc/thread-self`
                // and the 0 of `setpriority` and `sched_setscheduler` name the calling one, so
                // these change this thread only.
                try? name.write(toFile: "/proc/thread-self/comm", atomically: false, encoding: .utf8)
                switch priority {
                case .idle:
                    var parameters = sched_param(sched_priority: 0)
                    _ = sched_setscheduler(0, WorkThread.schedIdle, &parameters)
                case .nice(let niceness):
                    _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, niceness)
                }
            #endif
            while true {
                self.ready.wait()
                guard let job = self.jobs.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) else { continue }
                job()
            }
        }
        thread.start()
    }

    /// `SCHED_IDLE` from `<sched.h>`, which Glibc's Swift module leaves out (it is a GNU extension).
    static let schedIdle: Int32 = 5

    func submit(_ job: @escaping @Sendable () -> Void) {
        jobs.withLock { $0.append(job) }
        ready.signal()
    }
}
