import Registry
import Synchronization

/// Which projects relay, read from the store at most once a second: `project relay` on a running
/// server's database takes effect within that second, and a send costs no read for it.
final class RelaySettingsCache: Sendable {
    private let outbox: any OutboxStore
    private let maximumAge: Duration
    private let cached = Mutex<(settings: [Int64: ChannelSettings], readAt: ContinuousClock.Instant)?>(nil)

    init(outbox: any OutboxStore, maximumAge: Duration = .seconds(1)) {
        self.outbox = outbox
        self.maximumAge = maximumAge
    }

    func settings() async throws -> [Int64: ChannelSettings] {
        if let cached = cached.withLock({ $0 }), ContinuousClock.now - cached.readAt < maximumAge {
            return cached.settings
        }
        let settings = try await outbox.relaySettings()
        cached.withLock { $0 = (settings, .now) }
        return settings
    }
}
