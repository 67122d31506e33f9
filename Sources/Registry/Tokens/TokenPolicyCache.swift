import Foundation
import Synchronization

/// Each project's token policy, read from the store at most once a second per project: every
/// token shown and every fan-out (`sendToStale`) asks for it, and a read of its own each time is
/// a store round trip. A policy changed on another server (or by `project tokens` on the
/// database) takes effect here within that second; one changed through this process at once.
final class TokenPolicyCache: Sendable {
    private let maximumAge: Duration
    private let cached = Mutex<[Int64: (policy: TokenPolicy, readAt: ContinuousClock.Instant)]>([:])

    init(maximumAge: Duration = .seconds(1)) {
        self.maximumAge = maximumAge
    }

    /// The project's policy, read with `read` when the cached one is older than the age.
    func policy(of project: Int64, read: () async throws -> TokenPolicy) async throws -> TokenPolicy {
        if let entry = cached.withLock({ $0[project] }), ContinuousClock.now - entry.readAt < maximumAge {
            return entry.policy
        }
        let policy = try await read()
        cached.withLock { $0[project] = (policy, .now) }
        return policy
    }

    /// Forgets the project's policy: the next call reads it.
    func forget(_ project: Int64) {
        _ = cached.withLock { $0.removeValue(forKey: project) }
    }
}
