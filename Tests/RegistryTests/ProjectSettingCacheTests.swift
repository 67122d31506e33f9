import Foundation
import Synchronization
import Testing

@testable import Registry

/// A project's setting as hot calls ask for it (here whether it mirrors, as device-group calls
/// ask): from the store at most once a second.
@Suite("Project setting cache")
struct ProjectSettingCacheTests {
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
        let cache = ProjectSettingCache<ChannelSettings?>(maximumAge: .seconds(3600))
        #expect(try await cache.value(of: 1, read: read) == Self.settings)
        #expect(try await cache.value(of: 1, read: read) == Self.settings)
        #expect(reads.count.load(ordering: .relaxed) == 1)
        // Another project is read on its own; a project that does not mirror is cached as such.
        #expect(try await cache.value(of: 2) { nil } == nil)
        #expect(try await cache.value(of: 2, read: read) == nil)
        cache.forget(1)
        _ = try await cache.value(of: 1, read: read)
        #expect(reads.count.load(ordering: .relaxed) == 2)
        // With no age to keep them, every call reads.
        let uncached = ProjectSettingCache<ChannelSettings?>(maximumAge: .zero)
        _ = try await uncached.value(of: 1, read: read)
        _ = try await uncached.value(of: 1, read: read)
        #expect(reads.count.load(ordering: .relaxed) == 4)
    }
}
