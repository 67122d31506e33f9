import Dispatch
import Foundation
import Testing

@testable import RegistrySQLite

/// The SQLite import runs the shared async merge inside GRDB's synchronous write: every part of
/// it must run on the writer's thread, also after a suspension that really waits.
@Suite("Async work on the writer's thread")
struct WriterThreadExecutorTests {
    /// Runs `run` on a thread of its own, as GRDB's writer queue does, and returns whether every
    /// part of the body ran there, with the body's outcome.
    private func onWriterQueue(_ body: @escaping @Sendable (_ here: @escaping @Sendable () -> Bool) async throws -> Int)
        async -> Result<Int, any Error>
    {
        await withCheckedContinuation { continuation in
            DispatchQueue(label: "writer").async {
                let writer = pthread_self()
                let here: @Sendable () -> Bool = { pthread_equal(pthread_self(), writer) != 0 }
                continuation.resume(returning: Result { try WriterThreadExecutor.run { try await body(here) } })
            }
        }
    }

    @Test("The body runs to its end on the calling thread, before and after a real wait")
    func staysOnTheThread() async throws {
        let outcome = await onWriterQueue { here in
            let before = here()
            try await Task.sleep(for: .milliseconds(20))
            await Task.yield()
            return before && here() ? 42 : -1
        }
        #expect(try outcome.get() == 42)
    }

    @Test("What the body throws comes out of run")
    func throwsThrough() async {
        struct Refused: Error {}
        let outcome = await onWriterQueue { _ in throw Refused() }
        #expect(throws: Refused.self) { try outcome.get() }
    }
}
