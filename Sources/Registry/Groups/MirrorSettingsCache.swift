import Foundation
import Synchronization

/// Each project's mirror settings (`project mirror`), read from the store at most once a second
/// per project: every device-group call asks whether its project mirrors, and a read of its own
/// on each call is a store round trip a group create need not wait for. `project mirror` on a running server's
/// database (or on another server's, on PostgreSQL) takes effect within that second, as
/// `project relay` does; `setMirror` through this process takes effect at once.
final class MirrorSettingsCache: Sendable {
    private let maximumAge: Duration
    private let cached = Mutex<[Int64: (settings: ChannelSettings?, readAt: ContinuousClock.Instant)]>([:])

    init(maximumAge: Duration = .seconds(1)) {
        self.maximumAge = maximumAge
    }

    /// The project's settings, read with `read` when the cached ones are older than the age.
    func settings(of project: Int64, read: () async throws -> ChannelSettings?) async throws -> ChannelSettings? {
        if let entry = cached.withLock({ $0[project] }), ContinuousClock.now - entry.readAt < maximumAge {
            return entry.settings
        }
        let settings = try await read()
        cached.withLock { $0[project] = (settings, .now) }
        return settings
    }

    /// Forgets the project's settings: the next call reads them.
    func forget(_ project: Int64) {
        _ = cached.withLock { $0.removeValue(forKey: project) }
    }
}
