import Foundation
import Synchronization

/// Remembers what a server-key hash opened (project, key id, scopes), for one second.
///
/// Every request authenticates; a database read for each one costs more than creating a group
/// does. A key revoked through this registry is forgotten at once; one revoked by another process
/// (another server, or the `project revoke-key` command while the server runs) stops working
/// within a second, and a rotated key at the end of its grace period.
final class ServerKeyCache: Sendable {
    private struct Entry {
        var grant: KeyGrant?
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
    func lookUp(_ hash: [UInt8], now: Date = Date()) -> KeyGrant?? {
        let instant = ContinuousClock.now
        return entries.withLock { entries in
            guard let entry = entries[hash], entry.expires > instant else { return nil }
            if let expiresAt = entry.grant?.expiresAt, expiresAt <= now { return .some(nil) }
            return .some(entry.grant)
        }
    }

    func store(_ grant: KeyGrant?, for hash: [UInt8]) {
        let expires = ContinuousClock.now + lifetime
        entries.withLock { entries in
            if entries.count >= capacity { entries.removeAll(keepingCapacity: true) }
            entries[hash] = Entry(grant: grant, expires: expires)
        }
    }

    func forget(_ hash: [UInt8]) {
        _ = entries.withLock { $0.removeValue(forKey: hash) }
    }

    /// Forgets the key with this id, whatever its hash (a revocation by id).
    func forget(keyID: Int64) {
        entries.withLock { entries in
            for (hash, entry) in entries where entry.grant?.keyID == keyID { entries[hash] = nil }
        }
    }
}

/// The minute each key was last recorded as used by this process: a key's use is written on its
/// first request in a new minute, never once a request.
final class KeyUseMinutes: Sendable {
    private let minutes = Mutex<[Int64: Int64]>([:])

    /// Whether `keyID`'s use in the minute of `now` is still to be written; marks it written.
    func isFirstUse(of keyID: Int64, at now: Date) -> Date? {
        let minute = Int64(now.timeIntervalSince1970 / 60)
        let first = minutes.withLock { minutes in
            if minutes.count >= 100_000 { minutes.removeAll(keepingCapacity: true) }
            guard minutes[keyID] != minute else { return false }
            minutes[keyID] = minute
            return true
        }
        return first ? Date(timeIntervalSince1970: Double(minute) * 60) : nil
    }
}
