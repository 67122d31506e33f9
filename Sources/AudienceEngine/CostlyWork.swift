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
/// The thread runs at the lowest nice value (19), and whenever jobs queue up behind the one it
/// is running, as when clients stream 64 KiB conditions at it, under Linux's idle scheduling
/// policy (`SCHED_IDLE`) instead: then it gets the CPU only when no ordinary thread wants it,
/// and a thread answering `GET /health` or a write that wakes up takes the CPU from it at once.
/// Measured on 2 cores: 8 clients streaming condition checks cost 17% of the writes at nice 19
/// and 8% under the idle policy. A lone job (someone counting an audience while batchAdd runs
/// at full speed) keeps nice 19, where it still gets a share of a busy CPU: under the idle
/// policy the count's p99 went from 27 to 235 ms.
///
/// While flooded, the thread also rests after each job as long as the job ran, so a flood gets at
/// most half a core.
///
/// Leaving `SCHED_IDLE` takes `CAP_SYS_NICE` or a nice limit (`ulimit -e`) of at least 1; where
/// the process has neither, the thread stays at nice 19 throughout (``yieldsWhenFlooded``).
public enum CostlyWork {
    /// The request thread and its helper, made together from whichever thread first needs them
    /// (a new thread inherits its creator's policy, so the helper is not made from costly work).
    private static let threads = (
        requests: WorkThread(name: "fcm-costly", priority: .yielding),
        /// Takes the second half of a job split with ``inHalves(_:_:)``, at the policy of the first.
        helper: WorkThread(name: "fcm-costly-half", priority: .nice(19))
    )
    /// Long jobs no request waits for (writing a checkpoint), kept off the request thread too.
    private static let background = WorkThread(name: "fcm-background", priority: .nice(15))

    /// Whether costly work turns to `SCHED_IDLE` while jobs queue up: only where it can turn back.
    public static var yieldsWhenFlooded: Bool { WorkThread.canLeaveIdle }

    public static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            threads.requests.submit { continuation.resume(with: Result(catching: body)) }
        }
    }

    public static func run<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            threads.requests.submit { continuation.resume(returning: body()) }
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
    /// halves keep its policy; the helper runs one half at a time.
    public static func inHalves<A, B: Sendable>(_ first: () -> A, _ second: @escaping @Sendable () -> B) -> (A, B) {
        let half = HelperHalf<B>()
        let idle = WorkThread.isIdle
        threads.helper.submit {
            WorkThread.setIdle(idle)
            half.finish(second())
        }
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
final class WorkThread: Sendable {
    enum Priority {
        /// Nice 19, and Linux's `SCHED_IDLE` (only when nothing else wants the CPU) while at
        /// least ``backlog`` jobs wait behind the one running, where ``canLeaveIdle``.
        case yielding
        /// A nice value for the thread, 1 (slightly lower) to 19 (lowest).
        case nice(Int32)
    }

    /// Jobs waiting behind the running one from which a yielding thread turns to `SCHED_IDLE`.
    static let backlog = 2

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
                case .yielding: _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 19)
                case .nice(let niceness): _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, niceness)
                }
            #endif
            while true {
                self.ready.wait()
                guard
                    let (job, waiting) = self.jobs.withLock({ jobs in
                        jobs.isEmpty ? nil : (jobs.removeFirst(), jobs.count)
                    })
                else { continue }
                guard case .yielding = priority else {
                    job()
                    continue
                }
                let flooded = waiting >= WorkThread.backlog
                WorkThread.setIdle(flooded)
                let started = DispatchTime.now().uptimeNanoseconds
                job()
                // Flooded, the thread rests as long as the job ran: a stream of costly requests
                // gets at most half a core, even where the idle policy cannot keep it from
                // slowing its neighbours (a core's other hyperthread, shared caches).
                if flooded {
                    Thread.sleep(forTimeInterval: Double(DispatchTime.now().uptimeNanoseconds - started) / 1e9)
                }
            }
        }
        thread.start()
    }

    func submit(_ job: @escaping @Sendable () -> Void) {
        jobs.withLock { $0.append(job) }
        ready.signal()
    }

    /// Jobs waiting behind the one running.
    var queued: Int { jobs.withLock { $0.count } }

    /// `SCHED_IDLE` from `<sched.h>`, which Glibc's Swift module leaves out (it is a GNU extension).
    static let schedIdle: Int32 = 5

    /// Whether the calling thread runs under `SCHED_IDLE`.
    static var isIdle: Bool {
        #if canImport(Glibc)
            sched_getscheduler(0) == schedIdle
        #else
            false
        #endif
    }

    /// Puts the calling thread under `SCHED_IDLE`, or back under the ordinary policy; does
    /// nothing where a thread under `SCHED_IDLE` could not come back (``canLeaveIdle``).
    static func setIdle(_ idle: Bool) {
        #if canImport(Glibc)
            guard canLeaveIdle, idle != isIdle else { return }
            var parameters = sched_param(sched_priority: 0)
            _ = sched_setscheduler(0, idle ? schedIdle : Int32(SCHED_OTHER), &parameters)
        #endif
    }

    /// Whether a thread of this process may leave `SCHED_IDLE` once in it, which Linux allows
    /// only with `CAP_SYS_NICE` or a nice limit of at least 1: tried once, on a thread of its own
    /// made for the purpose (whatever happens to it, no working thread is left stuck).
    static let canLeaveIdle: Bool = {
        #if canImport(Glibc)
            let result = Mutex(false)
            let done = DispatchSemaphore(value: 0)
            let probe = Thread {
                var parameters = sched_param(sched_priority: 0)
                _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, 19)
                if sched_setscheduler(0, schedIdle, &parameters) == 0 {
                    let back = sched_setscheduler(0, Int32(SCHED_OTHER), &parameters) == 0
                    result.withLock { $0 = back }
                }
                done.signal()
            }
            probe.start()
            done.wait()
            return result.withLock { $0 }
        #else
            return false
        #endif
    }()
}
