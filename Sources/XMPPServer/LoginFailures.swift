import Synchronization

/// Failed XMPP logins per client address and sender id, so that nobody can guess a sender's keys,
/// or fill the log, as fast as they can reconnect: after ``allowed`` failures within ``window``
/// of the first, logins from that address as that sender are refused for ``window`` without their
/// credentials being checked, as ejabberd's `mod_fail2ban` refuses an address.
///
/// Keyed by the sender id too, so that app servers sharing an address (a NAT, a proxy) with
/// someone who fails are not locked out with them; and by address, so that nobody can lock a
/// sender out from everywhere by failing on purpose. IPv6 addresses count per /64, the block one
/// host is usually given.
final class LoginFailures: Sendable {
    /// Failed logins a key may have within ``window`` of its first.
    let allowed: Int
    /// How long failures are counted, and how long a key is then refused.
    let window: Duration
    /// Keys tracked at most. Past it, entries whose time is over are dropped, at most once a
    /// second; should every one still count, a new key is not tracked (whoever holds that many
    /// addresses can try as fast as any limit on one of them would let it).
    static let maximumKeys = 10_000

    private struct Entry {
        var failures: Int
        var since: ContinuousClock.Instant
        var refusedUntil: ContinuousClock.Instant?
    }

    private struct State {
        var entries: [String: Entry] = [:]
        var lastPrune = ContinuousClock.Instant.now
    }

    private let state = Mutex(State())

    init(allowed: Int = 10, window: Duration = .seconds(60)) {
        self.allowed = allowed
        self.window = window
    }

    /// The key failures are counted under: the address (an IPv6 one cut to its /64) and the sender.
    static func key(address: String, sender: String?) -> String {
        var host = address
        if address.contains(":") {
            let groups = address.split(separator: ":", omittingEmptySubsequences: false)
            // A /64 is the first four groups, unless `::` shortens the address before them.
            if !address.hasPrefix("::"), groups.prefix(4).allSatisfy({ !$0.isEmpty }) {
                host = groups.prefix(4).joined(separator: ":") + "::/64"
            }
        }
        return host + " " + (sender ?? "-")
    }

    /// How long logins under `key` are still refused, or `nil` when they are checked.
    func refusal(of key: String, now: ContinuousClock.Instant = .now) -> Duration? {
        state.withLock { state in
            guard let until = state.entries[key]?.refusedUntil else { return nil }
            guard until > now else {
                state.entries[key] = nil
                return nil
            }
            return until - now
        }
    }

    /// Counts a failed login under `key`.
    func failed(_ key: String, now: ContinuousClock.Instant = .now) {
        state.withLock { state in
            if var entry = state.entries[key], now - entry.since < window {
                entry.failures += 1
                if entry.failures >= allowed { entry.refusedUntil = now + window }
                state.entries[key] = entry
                return
            }
            if state.entries[key] == nil, state.entries.count >= Self.maximumKeys {
                guard now - state.lastPrune >= .seconds(1) else { return }
                state.lastPrune = now
                state.entries = state.entries.filter {
                    now - $0.value.since < window || ($0.value.refusedUntil ?? now) > now
                }
                guard state.entries.count < Self.maximumKeys else { return }
            }
            state.entries[key] = Entry(failures: 1, since: now, refusedUntil: allowed <= 1 ? now + window : nil)
        }
    }

    /// A login under `key` succeeded: its failures are forgotten.
    func succeeded(_ key: String) {
        _ = state.withLock { $0.entries.removeValue(forKey: key) }
    }
}
