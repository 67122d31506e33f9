import AudienceEngine
import Foundation
import Registry
import Synchronization
import TestBackends
import Testing

/// The follower when the feed cannot be read: it says so once, keeps trying, and catches up.
@Suite("Following the feed through failures", .onEveryBackend)
struct FeedFollowingTests {
    /// What a follower reported, in order.
    final class Reports: Sendable {
        private let events = Mutex<[String]>([])

        func record(_ event: RegistryService.FeedEvent) {
            let name =
                switch event {
                case .failed: "failed"
                case .recovered: "recovered"
                case .behind: "behind"
                case .reloaded: "reloaded"
                }
            events.withLock { $0.append(name) }
        }

        func count(_ name: String) -> Int {
            events.withLock { $0.filter { $0 == name }.count }
        }
    }

    static func members(of topic: String, in project: Project, seenBy registry: RegistryService) -> Int {
        registry.audience.snapshot(of: project.rowID).topics[topic]?.count ?? 0
    }

    /// Waits up to `seconds` for `condition`.
    static func eventually(within seconds: Double, _ condition: () -> Bool) async throws -> Bool {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            if condition() { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return condition()
    }

    @Test("Reads that fail are reported once, retried, and the follower catches up once the feed can be read")
    func failsOnceThenCatchesUp() async throws {
        let store = try await TestBackend.makeStore()
        let writer = try await RegistryService(store: store)
        let (project, _) = try await writer.createProject(projectId: "app", senderId: "111")
        let follower = try await RegistryService(store: try await TestBackend.reopen(store))
        try await follower.startAudience()
        let reports = Reports()
        let following = Task {
            await follower.followFeed(every: .milliseconds(10), maximumLag: .milliseconds(300)) { reports.record($0) }
        }
        _ = try await writer.subscribe([token(1)], to: "news", in: project)
        #expect(try await Self.eventually(within: 10) { Self.members(of: "news", in: project, seenBy: follower) == 1 })

        // The feed's table out of reach, as a database that refuses the read would have it.
        try await TestBackend.execute(#"ALTER TABLE "audienceChange" RENAME TO "audienceChangeAway""#, in: store)
        // Waited for, not timed: a loaded machine may take a while to get past the bound.
        #expect(try await Self.eventually(within: 20) { reports.count("behind") >= 1 })
        try await Task.sleep(for: .milliseconds(500))  // more failed rounds, which say nothing new
        #expect(reports.count("failed") == 1, "a failure is reported once, however many rounds fail")
        #expect(reports.count("behind") == 1, "the lag past the bound is reported once")
        #expect(follower.feedHealth.lag() > .milliseconds(300))
        try await TestBackend.execute(#"ALTER TABLE "audienceChangeAway" RENAME TO "audienceChange""#, in: store)

        _ = try await writer.subscribe([token(2)], to: "news", in: project)
        #expect(try await Self.eventually(within: 10) { Self.members(of: "news", in: project, seenBy: follower) == 2 })
        #expect(try await Self.eventually(within: 5) { reports.count("recovered") == 1 })
        // Caught up: the lag falls back under the bound (waited for, as a loaded machine's rounds may be late).
        #expect(try await Self.eventually(within: 10) { follower.feedHealth.lag() < .seconds(1) })
        following.cancel()
        await following.value
    }

    @Test("Readiness: ready while the index is current, not once it has not been current for longer than the bound")
    func readiness() async throws {
        let store = try await TestBackend.makeStore()
        let registry = try await RegistryService(store: store)
        try await registry.startAudience()
        let following = Task { await registry.followFeed(every: .milliseconds(10)) }
        // Generous bounds, and a wait for the follower's first pass: a loaded machine answers
        // slowly, and only "not ready" is under test below.
        var ready = await registry.readiness(maximumLag: .seconds(30), probeDeadline: .seconds(30))
        let waitedSince = ContinuousClock.now
        while !ready.ready && ContinuousClock.now - waitedSince < .seconds(30) {
            try await Task.sleep(for: .milliseconds(100))
            ready = await registry.readiness(maximumLag: .seconds(30), probeDeadline: .seconds(30))
        }
        #expect(ready.ready && ready.database == "reachable" && ready.reasons.isEmpty, "\(ready)")
        following.cancel()
        await following.value
        try await Task.sleep(for: .milliseconds(200))
        let behind = await registry.readiness(maximumLag: .milliseconds(100), probeDeadline: .seconds(30))
        #expect(!behind.ready)
        #expect(behind.database == "reachable")
        #expect(behind.reasons.count == 1 && behind.reasons[0].contains("not been current"))
    }
}

@Suite("Deadlines on calls that may never return")
struct DeadlineTests {
    /// An operation that never returns, and ignores cancellation.
    static func forever() async throws -> Int {
        await withCheckedContinuation { (_: CheckedContinuation<Void, Never>) in }
        return 0
    }

    @Test("An operation that never returns is abandoned at its deadline")
    func abandonedAtTheDeadline() async throws {
        let started = ContinuousClock.now
        let error = await #expect(throws: DeadlineExceeded.self) {
            try await withDeadline(.milliseconds(200), "waiting for ever") { try await Self.forever() }
        }
        // Only a hang fails this: a loaded machine runs timers late.
        #expect(ContinuousClock.now - started < .seconds(60))
        #expect(error?.meansUnavailable == true)
        #expect(error?.summary == "waiting for ever took longer than 0.2 seconds")
    }

    @Test("Cancelling the caller ends the wait at once, whatever the operation does")
    func cancelledCaller() async throws {
        let waiting = Task { try await withDeadline(.seconds(600), "waiting for ever") { try await Self.forever() } }
        try await Task.sleep(for: .milliseconds(50))
        let started = ContinuousClock.now
        waiting.cancel()
        await #expect(throws: CancellationError.self) { try await waiting.value }
        #expect(ContinuousClock.now - started < .seconds(60))
    }

    @Test("What returns in time is returned, and what throws in time is thrown")
    func inTime() async throws {
        #expect(try await withDeadline(.seconds(5), "adding") { 2 + 2 } == 4)
        struct Refused: Error {}
        await #expect(throws: Refused.self) {
            try await withDeadline(.seconds(5), "refusing") { () async throws -> Int in throw Refused() }
        }
    }
}
