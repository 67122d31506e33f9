import Synchronization

/// Failed XMPP logins per client address, so that one client cannot guess keys, or fill the log,
/// as fast as it can reconnect: after ``allowed`` failures within ``window`` of its first, an
/// address is refused for ``window`` without its credentials being checked, as ejabberd's
/// `mod_fail2ban` does.
///
/// Addresses, not sender ids: a sender blocked after failures would let anyone who knows a sender
/// id (it is in every app's configuration) lock that app server out by failing on purpose.
final class LoginFailures: Sendable {
    /// Failed logins an address may have within ``window`` of its first.
    let allowed: Int
    /// How long failures are counted, and how long an address is then refused.
    let window: Duration
    /// Addresses tracked at most. Past it, entries whose window is over are dropped; should every
    /// one still count, a new address is not tracked (an attacker with that many addresses can
    /// try as fast as any limit on one of them would let it).
    static let maximumAddresses = 10_000

    private struct Entry {
        var failures: Int
        var since: ContinuousClock.Instant
        var refusedUntil: ContinuousClock.Instant?
    }

    private let entries = Mutex([String: Entry]())

    init(allowed: Int = 10, window: Duration = .seconds(60)) {
        self.allowed = allowed
        self.window = window
    }

    /// How long logins from `address` are still refused, or `nil` when they are checked.
    func refusal(of address: String, now: ContinuousClock.Instant = .now) -> Duration? {
        entries.withLock { entries in
            guard let until = entries[address]?.refusedUntil else { return nil }
            guard until > now else {
                entries[address] = nil
                return nil
            }
            return until - now
        }
    }

    /// Counts a failed login from `address`.
    func failed(_ address: String, now: ContinuousClock.Instant = .now) {
        entries.withLock { entries in
            if var entry = entries[address], now - entry.since < window {
                entry.failures += 1
                if entry.failures >= allowed { entry.refusedUntil = now + window }
                entries[address] = entry
                return
            }
            if entries[address] == nil, entries.count >= Self.maximumAddresses {
                entries = entries.filter { now - $0.value.since < window || ($0.value.refusedUntil ?? now) > now }
                guard entries.count < Self.maximumAddresses else { return }
            }
            entries[address] = Entry(
                failures: 1, since: now, refusedUntil: allowed <= 1 ? now + window : nil)
        }
    }
}
