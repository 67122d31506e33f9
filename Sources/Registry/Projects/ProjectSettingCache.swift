import Foundation
import Synchronization

/// One of each project's settings, read from the store at most once per `maximumAge` (a second)
/// per project, for settings hot calls ask for: whether a project mirrors (every device-group
/// call), its token policy (every token shown, every fan-out). A change made on another server,
/// or with the command line on the database, takes effect here within that age; one made through
/// this process at once, by `forget`ting the project.
final class ProjectSettingCache<Value: Sendable>: Sendable {
    private let maximumAge: Duration
    private let cached = Mutex<[Int64: (value: Value, readAt: ContinuousClock.Instant)]>([:])

    init(maximumAge: Duration = .seconds(1)) {
        self.maximumAge = maximumAge
    }

    /// The project's setting, read with `read` when the cached one is older than the age.
    func value(of project: Int64, read: () async throws -> Value) async throws -> Value {
        if let entry = cached.withLock({ $0[project] }), ContinuousClock.now - entry.readAt < maximumAge {
            return entry.value
        }
        let value = try await read()
        cached.withLock { $0[project] = (value, .now) }
        return value
    }

    /// Forgets the project's setting: the next call reads it.
    func forget(_ project: Int64) {
        _ = cached.withLock { $0.removeValue(forKey: project) }
    }
}
