import Foundation

/// How many tests run their PostgreSQL pass at once. Swift Testing starts every test together;
/// on a 2-core machine, a hundred PostgreSQL passes starting in the same second (each creating a
/// schema, migrating it, and dropping it at its end through one shared admin pool) queue for
/// longer than a pool's 10 s wait for a connection, and fail for the machine's load rather than
/// for anything they test. `FCM_REGISTRY_TEST_POSTGRES_PARALLEL` sets the number (8 by default).
actor PostgresPassGate {
    static let shared = PostgresPassGate(
        permits: ProcessInfo.processInfo.environment["FCM_REGISTRY_TEST_POSTGRES_PARALLEL"].flatMap(Int.init)
            .map { max(1, $0) } ?? 8)

    private var free: Int
    private var waiting: [CheckedContinuation<Void, Never>] = []

    init(permits: Int) {
        free = permits
    }

    /// Waits for a permit.
    func enter() async {
        if free > 0 {
            free -= 1
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }

    /// Gives a permit back, to the test that waited longest.
    func leave() {
        if waiting.isEmpty {
            free += 1
        } else {
            waiting.removeFirst().resume()
        }
    }
}
