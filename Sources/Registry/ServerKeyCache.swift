import Synchronization

/// Remembers which project a server-key hash opened, for one second.
///
/// Every request authenticates; a database read for each one costs more than creating a group
/// does. A key revoked through this registry is forgotten at once; one revoked by another process
/// (the `project revoke-key` command while the server runs) stops working within a second.
final class ServerKeyCache: Sendable {
    private struct Entry {
        var project: Project?
        var expires: ContinuousClock.Instant
    }

    private let entries = Mutex<[[UInt8]: Entry]>([:])
    private let lifetime: Duration
    private let capacity: Int

    init(lifetime: Duration = .seconds(1), capacity: Int = 10_000) {
        self.lifetime = lifetime
        self.capacity = capacity
    }

    /// The cached answer for `hash`: `.some(nil)` for a key known to be invalid, `nil` when not cached.
    func lookUp(_ hash: [UInt8]) -> Project?? {
        let now = ContinuousClock.now
        return entries.withLock { entries in
            guard let entry = entries[hash], entry.expires > now else { return nil }
            return .some(entry.project)
        }
    }

    func store(_ project: Project?, for hash: [UInt8]) {
        let expires = ContinuousClock.now + lifetime
        entries.withLock { entries in
            if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
            entries[hash] = Entry(project: project, expires: expires)
        }
    }

    func forget(_ hash: [UInt8]) {
        _ = entries.withLock { $0.removeValue(forKey: hash) }
    }
}
