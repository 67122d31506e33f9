import Dispatch

/// Work whose cost grows with its input (parsing and checking a condition, set algebra over an
/// audience), run on a thread of its own instead of the cooperative pool that answers every
/// other request. Each such job is bounded (conditions are at most 64 KiB and lint linearly), but
/// several at once could still occupy every pool thread; here they queue behind one another and
/// `GET /health` and ordinary writes keep answering.
public enum CostlyWork {
    private static let queue = DispatchQueue(label: "fcm-registry.costly-work", qos: .utility)
    /// Long jobs no request waits for (writing a checkpoint), kept off `queue` too.
    private static let background = DispatchQueue(label: "fcm-registry.background-work", qos: .background)

    public static func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            queue.async { continuation.resume(with: Result(catching: body)) }
        }
    }

    /// Runs `body` on a thread of its own that requests never wait behind.
    public static func runInBackground<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { continuation in
            background.async { continuation.resume(with: Result(catching: body)) }
        }
    }

    public static func run<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
        await withCheckedContinuation { continuation in
            queue.async { continuation.resume(returning: body()) }
        }
    }
}
