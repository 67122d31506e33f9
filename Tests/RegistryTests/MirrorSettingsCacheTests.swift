import Foundation
import Synchronization
import Testing

@testable import Registry

/// Whether a project mirrors, as device-group calls ask it: from the store at most once a second.
@Suite("Mirror settings cache")
struct MirrorSettingsCacheTests {
    final class Reads: Sendable {
        let count = Atomic<Int>(0)
    }

    static let settings = ChannelSettings(channel: "fcm-v1", settings: [:], secrets: [:])

    @Test("Read once while fresh, again once forgotten or too old, per project")
    func readsOncePerAge() async throws {
        let reads = Reads()
        let read: () async throws -> ChannelSettings? = {
            reads.count.add(1, ordering: .relaxed)
            return Self.settings
        }
        let cache = MirrorSettingsCache(maximumAge: .seconds(3600))
        #expect(try await cache.settings(of: 1, read: read) == Self.settings)
        #expect(try await cache.settings(of: 1, read: read) == Self.settings)
        #expect(reads.count.load(ordering: .relaxed) == 1)
        // Another project is read on its own; a project that does not mirror is cached as such.
        #expect(try await cache.settings(of: 2) { nil } == nil)
        #expect(try await cache.settings(of: 2, read: read) == nil)
        cache.forget(1)
        _ = try await cache.settings(of: 1, read: read)
        #expect(reads.count.load(ordering: .relaxed) == 2)
        // With no age to keep them, every call reads.
        let uncached = MirrorSettingsCache(maximumAge: .zero)
        _ = try await uncached.settings(of: 1, read: read)
        _ = try await uncached.settings(of: 1, read: read)
        #expect(reads.count.load(ordering: .relaxed) == 4)
    }
}
