import Dispatch
import Foundation
#if canImport(Glibc)
    import Glibc
#endif
@testable import Registry
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
        /// share of a busy CPU.
        @Test("A lone costly job runs at nice 19; behind a backlog, under SCHED_IDLE, both halves of a split job too")
        func priorities() async throws {
            let schedIdle: Int32 = 5
            // Other suites' costly work shares the thread: try until a job really runs alone.
            var lone: (Int32, Int32) = (-1, -1)
            for _ in 0..<100 where lone != (SCHED_OTHER, 19) {
                while CostlyWork.queued > 0 { try await Task.sleep(for: .milliseconds(5)) }
                lone = await CostlyWork.run {
                    (sched_getscheduler(0), getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0))
                }
            }
            #expect(lone == (SCHED_OTHER, 19))

            let release = DispatchSemaphore(value: 0)
            let blocker = Task { await CostlyWork.run { release.wait() } }
            let queued = Task {
                await withTaskGroup(of: [Int32].self) { group in
                    for _ in 0..<3 {
                        group.addTask {
                            await CostlyWork.run {
                                let halves = CostlyWork.inHalves({ sched_getscheduler(0) }, { sched_getscheduler(0) })
                                return [sched_getscheduler(0), halves.0, halves.1]
                            }
                        }
                    }
                    return await group.reduce(into: []) { $0.append($1) }
                }
            }
            // The blocker runs and three jobs wait behind it.
            while CostlyWork.queued < 3 { try await Task.sleep(for: .milliseconds(10)) }
            release.signal()
            await blocker.value
            let policies = await queued.value
            // The first of them ran with two behind it: under SCHED_IDLE, both halves included.
            #expect(policies.contains([schedIdle, schedIdle, schedIdle]))

            let niceness = try await CostlyWork.runInBackground {
                getpriority(__priority_which_t(PRIO_PROCESS.rawValue), 0)
            }
            #expect(niceness == 15)
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
