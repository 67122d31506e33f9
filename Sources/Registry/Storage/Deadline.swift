import Synchronization

/// A call to the database that did not answer within its deadline: it was abandoned, and wrote
/// nothing the caller waits for. Answered as "unavailable, try again".
public struct DeadlineExceeded: StoreConnectionFailure, CustomStringConvertible {
    /// What was abandoned: "reading the change feed".
    public var what: String
    public var limit: Duration

    public init(_ what: String, limit: Duration) {
        self.what = what
        self.limit = limit
    }

    public var meansUnavailable: Bool { true }
    public var summary: String { "\(what) took longer than \(limit)" }
    public var description: String { summary }
}

/// Runs `operation` and returns what it returns, or throws `DeadlineExceeded` once `limit` has
/// passed, whatever the operation is doing then: it is cancelled and abandoned, and what it
/// returns afterwards is dropped. Cancelling the caller ends the wait at once, too.
///
/// For calls that may never return: a read on a connection PostgreSQL lost without a word, a
/// lease from a pool that keeps retrying. A task group would wait for a child that ignores
/// cancellation; this does not, so a follower or a shutdown is never held by one such call.
/// Only for operations whose late end harms nothing (reads, probes): an abandoned write may
/// still commit.
public func withDeadline<Value: Sendable>(
    _ limit: Duration, _ what: String, _ operation: @escaping @Sendable () async throws -> Value
) async throws -> Value {
    try await abandoning(operation) {
        try? await Task.sleep(for: limit)
        return Task.isCancelled ? nil : DeadlineExceeded(what, limit: limit)
    }
}

/// Runs `operation` and returns what it returns, unless `giveUp` returns an error first: then
/// that error is thrown at once, and the operation is cancelled and abandoned (what it returns
/// afterwards is dropped). Cancelling the caller ends the wait at once too, with
/// `CancellationError`. `giveUp` is cancelled when the operation ends; it returns `nil` then.
public func abandoning<Value: Sendable>(
    _ operation: @escaping @Sendable () async throws -> Value,
    when giveUp: @escaping @Sendable () async -> (any Error)?
) async throws -> Value {
    let race = AbandonRace<Value>()
    let work = Task {
        do {
            race.finish(.success(try await operation()))
        } catch {
            race.finish(.failure(error))
        }
    }
    let watch = Task {
        guard let error = await giveUp() else { return }
        race.finish(.failure(error))
        work.cancel()
    }
    defer { watch.cancel() }
    return try await withTaskCancellationHandler {
        try await withCheckedThrowingContinuation { race.arm($0) }
    } onCancel: {
        race.finish(.failure(CancellationError()))
        work.cancel()
    }
}

/// The first of the operation, the watch and cancellation to finish resumes the waiting caller;
/// the others are ignored. A result that comes before the caller waits is kept for it.
private final class AbandonRace<Value: Sendable>: Sendable {
    private enum State {
        case idle(pending: Result<Value, any Error>?)
        case waiting(CheckedContinuation<Value, any Error>)
        case done
    }

    private let state = Mutex<State>(.idle(pending: nil))

    func arm(_ continuation: CheckedContinuation<Value, any Error>) {
        let pending: Result<Value, any Error>? = state.withLock { state in
            guard case .idle(let pending) = state else { return nil }
            state = pending == nil ? .waiting(continuation) : .done
            return pending
        }
        if let pending { continuation.resume(with: pending) }
    }

    func finish(_ result: Result<Value, any Error>) {
        let continuation: CheckedContinuation<Value, any Error>? = state.withLock { state in
            switch state {
            case .idle(pending: nil):
                state = .idle(pending: result)
                return nil
            case .waiting(let continuation):
                state = .done
                return continuation
            case .idle, .done:
                return nil
            }
        }
        continuation?.resume(with: result)
    }
}
