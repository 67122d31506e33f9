import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// Work whose cost grows with its input (parsing and checking a condition, set algebra over an
/// audience), run on a thread of its own instead of the cooperative pool that answers every
/// other request. Each such job is bounded (conditions are at most 64 KiB and lint linearly), but
/// several at once could still occupy every pool thread; here they queue behind one another.
///
/// The thread also runs at the lowest scheduling priority (nice 19): on a machine with few cores, a
/// stream of costly requests then takes the CPU only when the threads answering `GET /health` and
/// ordinary writes do not want it, instead of sharing it with them evenly.
public enum CostlyWork {
    private static let requests = WorkThread(name: "fcm-registry.costly-work", niceness: 19)
    /// Long jobs no request waits for (writing a checkpoint), kept off the request thread too.
    private static let background = WorkThread(name: "fcm-registry.background-work", niceness: 15)

    public static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            requests.submit { continuation.resume(with: Result(catching: body)) }
        }
    }

    /// Runs `body` on a thread of its own that requests never wait behind.
    public static func runInBackground<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            background.submit { continuation.resume(with: Result(catching: body)) }
        }
    }

    public static func run<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            requests.submit { continuation.resume(returning: body()) }
        }
    }
}

/// One long-lived thread running jobs in order, at a lowered priority.
private final class WorkThread: Sendable {
    private let jobs = Mutex<[@Sendable () -> Void]>([])
    private let ready = DispatchSemaphore(value: 0)

    init(name: String, niceness: Int32) {
        let thread = Thread { [self] in
            #if canImport(Glibc)
                // Linux keeps a nice value per thread, and `who` 0 names the calling one: this
                // lowers this thread only.
                _ = setpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0, niceness)
            #endif
            while true {
                self.ready.wait()
                guard let job = self.jobs.withLock({ $0.isEmpty ? nil : $0.removeFirst() }) else { continue }
                job()
            }
        }
        thread.name = name
        thread.start()
    }

    func submit(_ job: @escaping @Sendable () -> Void) {
        jobs.withLock { $0.append(job) }
        ready.signal()
    }
}
