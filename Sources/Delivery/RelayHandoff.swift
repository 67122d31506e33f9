import Registry
import Synchronization

/// What the sink and the worker of one server share: the worker's door (a direct send's job is
/// worked at once by the server that took it), the doorbell (a topic send is looked at without
/// waiting for the next poll), and the answers direct sends wait for.
public final class RelayHandoff: Sendable {
    /// This server's name in claims: the operator's `--server-id`, or one made up for this process.
    public let serverID: String
    /// Whether the name outlives the process (`--server-id`): then claims under it at start are
    /// this server's from before a crash, taken back at once. A made-up name is new at every
    /// start, and a dead process's claims pass on when their lease runs out.
    public let keepsItsName: Bool

    private struct Waiter {
        var recipients: [String]
        var refused: [String: MessageProblem] = [:]
        var delivered: Set<String> = []
        /// The job finished, or the answer timeout passed, before the sender began to wait.
        var finished = false
        var continuation: CheckedContinuation<DirectOutcomes, Never>?

        var outcomes: DirectOutcomes {
            DirectOutcomes(
                refused: refused,
                undecided: Set(recipients).subtracting(delivered).subtracting(refused.keys))
        }
    }

    /// The doorbell: a ring held while the worker is busy, or the worker waiting for one.
    private struct Bell {
        var rung = false
        var listener: CheckedContinuation<Void, Never>?
    }

    private let starter = Mutex<(@Sendable (OutboxJob) -> Void)?>(nil)
    private let waiters = Mutex<[Int64: Waiter]>([:])
    private let bell = Mutex(Bell())

    /// - Parameter serverID: a name unique among the servers on the database that this server
    ///   keeps from start to start; `nil` makes one up for this process.
    public init(serverID: String? = nil) {
        self.serverID = serverID ?? "\(UInt64.random(in: 1...UInt64.max))"
        keepsItsName = serverID != nil
    }

    // MARK: - The worker's side

    /// The worker is running: `start` hands it jobs from now on.
    func attach(_ start: @escaping @Sendable (OutboxJob) -> Void) {
        starter.withLock { $0 = start }
    }

    func detach() {
        starter.withLock { $0 = nil }
    }

    /// Whether a worker runs in this process to take a job at once.
    var isAttached: Bool { starter.withLock { $0 != nil } }

    /// Waits for the doorbell (a ring since the last wait counts), at most `timeout`. One
    /// listener: the worker's loop.
    func waitForWork(_ timeout: Duration) async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { [self] in
                try? await Task.sleep(for: timeout)
                if !Task.isCancelled { wake() }
            }
            await withCheckedContinuation { continuation in
                let rung = bell.withLock { bell -> Bool in
                    guard !bell.rung else {
                        bell.rung = false
                        return true
                    }
                    bell.listener = continuation
                    return false
                }
                if rung { continuation.resume() }
            }
            group.cancelAll()
        }
    }

    /// A recipient of a direct job failed for good.
    func refused(_ token: String, _ problem: MessageProblem, job: Int64) {
        waiters.withLock { waiters in waiters[job]?.refused[token] = problem }
    }

    /// Whether a sender still waits for the job's answer on this server.
    func isAwaited(_ job: Int64) -> Bool {
        waiters.withLock { waiters in waiters[job].map { !$0.finished } ?? false }
    }

    /// FCM took the message for a recipient of a direct job.
    func delivered(_ token: String, job: Int64) {
        waiters.withLock { waiters in _ = waiters[job]?.delivered.insert(token) }
    }

    /// The job has an outcome for every recipient (or this server stopped working it).
    func finished(_ job: Int64) {
        answer(job)
    }

    // MARK: - The sink's side

    /// Rings the doorbell: there is new work.
    public func wake() {
        let listener = bell.withLock { bell -> CheckedContinuation<Void, Never>? in
            guard let listener = bell.listener else {
                bell.rung = true
                return nil
            }
            bell.listener = nil
            return listener
        }
        listener?.resume()
    }

    /// Hands a job this server claimed to its worker, and waits for the recipients FCM refused,
    /// at most `timeout`; what is still pending then is answered as accepted.
    func deliverNow(_ job: OutboxJob, to recipients: [String], timeout: Duration) async -> DirectOutcomes {
        waiters.withLock { $0[job.id] = Waiter(recipients: recipients) }
        guard let start = starter.withLock({ $0 }) else {
            _ = waiters.withLock { $0.removeValue(forKey: job.id) }
            wake()
            return DirectOutcomes(undecided: Set(recipients))
        }
        start(job)
        let id = job.id
        return await withTaskGroup(of: Void.self) { group in
            group.addTask { [self] in
                try? await Task.sleep(for: timeout)
                self.answer(id)
            }
            let refused = await withCheckedContinuation { continuation in
                let done = waiters.withLock { waiters -> DirectOutcomes? in
                    guard var waiter = waiters[id] else { return DirectOutcomes.none }
                    if waiter.finished {
                        waiters[id] = nil
                        return waiter.outcomes
                    }
                    waiter.continuation = continuation
                    waiters[id] = waiter
                    return nil
                }
                if let done { continuation.resume(returning: done) }
            }
            group.cancelAll()
            return refused
        }
    }

    /// The sender gets what is known now: the job finished, or the answer timeout passed. One
    /// not waiting yet gets it as soon as it does.
    private func answer(_ job: Int64) {
        let resumed = waiters.withLock {
            waiters -> (CheckedContinuation<DirectOutcomes, Never>, DirectOutcomes)? in
            guard var waiter = waiters[job] else { return nil }
            guard let continuation = waiter.continuation else {
                waiter.finished = true
                waiters[job] = waiter
                return nil
            }
            waiters[job] = nil
            return (continuation, waiter.outcomes)
        }
        if let (continuation, outcomes) = resumed { continuation.resume(returning: outcomes) }
    }
}
