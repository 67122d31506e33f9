@testable import AudienceEngine
import Dispatch
import Foundation

#if canImport(Glibc)
    import Glibc
#endif
@testable import Registry
import Synchronization
import Testing

@Suite("Costly work")
struct CostlyWorkTests {
    /// More costly jobs than the cooperative pool has threads, all stuck: if they ran on the pool,
    /// nothing else could run and this test would hang until its time limit.
    @Test("Costly jobs run off the cooperative pool: other tasks go on while they are stuck", .timeLimit(.minutes(1)))
    func offThePool() async throws {
        let release = DispatchSemaphore(value: 0)
        let jobs = ProcessInfoCores.count * 2
        let running = Task {
            await withTaskGroup(of: Int.self) { group in
                for n in 0..<jobs {
                    group.addTask { await CostlyWork.run { release.wait(); return n } }
                }
                return await group.reduce(0, +)
            }
        }
        // Cheap work, on the pool, while every costly job waits.
        let cheap = await Task.detached { (1...100).reduce(0, +) }.value
        #expect(cheap == 5050)
        for _ in 0..<jobs { release.signal() }
        #expect(await running.value == (0..<jobs).reduce(0, +))
    }

    #if os(Linux)
        /// Under the idle policy, a thread answering a cheap request takes the CPU from costly
        /// work the moment it wakes; a lone costly job keeps a nice value, which still gets it a
        /// share of a busy CPU. A thread of the test's own, so other suites' work cannot interfere.
        @Test(
            "A lone costly job runs at nice 19; behind a backlog, under SCHED_IDLE (where it can come back), both halves too",
            .timeLimit(.minutes(1)))
        func priorities() async throws {
            let thread = WorkThread(name: "test-yielding", priority: .yielding)
            let (lonePolicy, loneNice) = await withCheckedContinuation { continuation in
                thread.submit {
                    continuation.resume(
                        returning: (sched_getscheduler(0), getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0)))
                }
            }
            #expect(lonePolicy == SCHED_OTHER && loneNice == 19)

            // One job holds the thread while three queue behind it.
            let started = DispatchSemaphore(value: 0)
            let release = DispatchSemaphore(value: 0)
            let finished = DispatchSemaphore(value: 0)
            thread.submit {
                started.signal()
                release.wait()
            }
            await Self.wait(for: started)
            let policies = Mutex<[[Int32]]>([])
            for _ in 0..<3 {
                thread.submit {
                    let halves = CostlyWork.inHalves({ sched_getscheduler(0) }, { sched_getscheduler(0) })
                    policies.withLock { $0.append([sched_getscheduler(0), halves.0, halves.1]) }
                    finished.signal()
                }
            }
            #expect(thread.queued == 3)
            release.signal()
            for _ in 0..<3 { await Self.wait(for: finished) }
            let idle: Int32 = WorkThread.canLeaveIdle ? WorkThread.schedIdle : SCHED_OTHER
            let ran = policies.withLock { $0 }
            // The first ran with two behind it, the last alone.
            #expect(ran.first == [idle, idle, idle])
            #expect(ran.last == [SCHED_OTHER, SCHED_OTHER, SCHED_OTHER])

            let niceness = try await CostlyWork.runInBackground {
                getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0)
            }
            #expect(niceness == 15)
        }

        /// Waits for `semaphore` on a thread of its own: blocking the cooperative pool could stall other tests.
        static func wait(for semaphore: DispatchSemaphore) async {
            await withCheckedContinuation { continuation in
                DispatchQueue.global().async {
                    semaphore.wait()
                    continuation.resume()
                }
            }
        }
    #endif

    @Test("A split job's halves both run, and each sees what it was given")
    func halves() async {
        let (a, b) = await CostlyWork.run { CostlyWork.inHalves({ (0..<1000).reduce(0, +) }, { (1000..<2000).reduce(0, +) }) }
        #expect(a == 499_500)
        #expect(b == 1_499_500)
    }
}

/// The cores the cooperative pool sizes itself by.
enum ProcessInfoCores {
    static var count: Int { max(2, ProcessInfo.processInfo.activeProcessorCount) }
}
