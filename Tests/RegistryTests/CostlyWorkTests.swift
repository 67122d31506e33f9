import Dispatch
import Foundation
import Registry
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
}

/// The cores the cooperative pool sizes itself by.
enum ProcessInfoCores {
    static var count: Int { max(2, ProcessInfo.processInfo.activeProcessorCount) }
}
