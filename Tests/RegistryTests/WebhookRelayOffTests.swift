import Foundation
import TestBackends
import Testing

@testable import Registry

/// Turning the relay off finishes its project's unfinished messages (`RELAY_OFF`): each one's
/// completion is told to the webhooks that asked for it, in the same transaction.
@Suite("Webhooks when the relay is turned off", .onEveryBackend)
struct WebhookRelayOffTests {
    @Test func eachUnfinishedMessageIsToldCompletedWithItsRecipientsFailed() async throws {
        let hooks = WebhookTests()
        let (store, project, job, page, _) = try await hooks.claimedSend(
            3, hooks: [[.messageCompleted], [.tokenUnregistered]])
        // One recipient delivered before the switch: the completion counts it.
        var first = page
        first.attempts = [page.attempts[0]]
        first.walked = false
        first.cursor = page.attempts[0].tokenID ?? 0
        _ = try await store.record(
            [hooks.outcome(page.attempts[0], .delivered)], of: job, page: first, claimant: "a", leaseUntil: Date(),
            now: Date())
        try await store.setRelay(nil, for: project)
        let queued = try await hooks.queued(store)
        #expect(queued.map(\.type) == ["message.completed"])
        let data = try hooks.data(try #require(queued.first))
        #expect(data["messageId"] as? String == "m1")
        #expect(data["delivered"] as? Int == 1)
        #expect(data["failed"] as? Int == 2)
        // Nothing unfinished is left to tell again.
        try await store.setRelay(nil, for: project)
        #expect(try await hooks.queued(store, at: Date().addingTimeInterval(3600)).count == 1)
    }
}
