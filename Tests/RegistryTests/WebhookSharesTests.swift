import Foundation
import TestBackends
import Testing

@testable import Registry

/// A server's webhook attempts shared fairly: the rule (`WebhookShares.allot`) on its own, then
/// the stores' claims that follow it, "retry now", and what a webhook shows of its queue.
@Suite("Webhook shares")
struct WebhookShareRuleTests {
    static func due(_ webhook: Int64, project: Int64, failing: Bool = false) -> DueWebhook {
        DueWebhook(webhook: webhook, project: project, failing: failing)
    }

    static func delivery(webhook: Int64, project: Int64) -> WebhookDelivery {
        WebhookDelivery(
            id: 0, webhook: webhook, webhookID: "wh_\(webhook)", project: project, eventID: "msg_x", type: "t",
            payload: "{}", attempts: 0, url: "https://93.184.215.14/", secret: "whsec_", previousSecret: nil)
    }

    @Test("A webhook or a project takes half the slots at most; the rest go to the others, round by webhook")
    func halfEach() {
        let shares = WebhookShares(slots: 16)
        // One webhook alone: half the slots, never all.
        #expect(shares.allot([Self.due(1, project: 1)]).map(\.count) == [8])
        // Two webhooks of one project: the project's half, shared one by one.
        #expect(shares.allot([Self.due(1, project: 1), Self.due(2, project: 1)]).map(\.count) == [4, 4])
        // Two projects: each its half.
        let two = shares.allot([Self.due(1, project: 1), Self.due(2, project: 2)])
        #expect(two.map(\.webhook) == [1, 2] && two.map(\.count) == [8, 8])
    }

    @Test("A failing webhook is tried one attempt at a time")
    func failingOne() {
        let shares = WebhookShares(slots: 16)
        let counts = shares.allot([Self.due(1, project: 1, failing: true), Self.due(2, project: 2)])
        #expect(counts.map(\.webhook) == [1, 2] && counts.map(\.count) == [1, 8])
    }

    @Test("Attempts in flight count against their webhook's, their project's and the server's room")
    func inFlightCounts() {
        var shares = WebhookShares(slots: 16)
        for _ in 0..<8 { shares.started(Self.delivery(webhook: 1, project: 1)) }
        // The stalled webhook holds its half: nothing more for it, or its project; the other gets its share.
        #expect(shares.free == 8)
        let counts = shares.allot([Self.due(1, project: 1), Self.due(3, project: 1), Self.due(2, project: 2)])
        #expect(counts.map(\.webhook) == [2] && counts.map(\.count) == [8])
        // Full: nothing for anyone. One attempt ends: one more.
        for _ in 0..<8 { shares.started(Self.delivery(webhook: 2, project: 2)) }
        #expect(shares.allot([Self.due(4, project: 3)]).isEmpty)
        shares.ended(Self.delivery(webhook: 1, project: 1))
        #expect(shares.allot([Self.due(4, project: 3)]).map(\.count) == [1])
        #expect(shares.free == 1)
    }

    @Test("Two slots or one still leave every webhook a turn")
    func smallServers() {
        #expect(WebhookShares(slots: 1).allot([Self.due(1, project: 1)]).map(\.count) == [1])
        let two = WebhookShares(slots: 2).allot([Self.due(1, project: 1), Self.due(2, project: 2)])
        #expect(two.map(\.count) == [1, 1])
    }
}

@Suite("Webhook claims by share", .onEveryBackend)
struct WebhookShareClaimTests {
    let fixture = WebhookTests()

    @Test("A long queue of one webhook does not keep another's event waiting behind it")
    func roundByWebhook() async throws {
        let (store, _, job, page, hooks) = try await fixture.claimedSend(
            20, hooks: [[.deliveryFailed], [.messageCompleted]])
        _ = try await store.record(
            page.attempts.map { fixture.outcome($0, .failed, "INVALID_ARGUMENT") }, of: job, page: page,
            claimant: "a", leaseUntil: Date(), now: Date())
        let now = Date()
        var shares = WebhookShares(slots: 16)
        let claimed = try await store.claimWebhookEvents(
            "w", leaseUntil: now.addingTimeInterval(60), now: now, shares: shares)
        let byHook = Dictionary(grouping: claimed, by: \.webhookID).mapValues(\.count)
        // The completion event is among the first claimed, though 20 failures were queued before it.
        #expect(byHook[hooks[1].webhook.id] == 1)
        #expect((1...7).contains(byHook[hooks[0].webhook.id] ?? 0))
        // The next claim, with those in flight, fills the project's half of 16 and no more.
        for delivery in claimed { shares.started(delivery) }
        let more = try await store.claimWebhookEvents(
            "w", leaseUntil: now.addingTimeInterval(60), now: now, shares: shares)
        #expect(claimed.count + more.count == 8)
        #expect(more.allSatisfy { $0.webhookID == hooks[0].webhook.id })
        for delivery in more { shares.started(delivery) }
        #expect(
            try await store.claimWebhookEvents("w", leaseUntil: now.addingTimeInterval(60), now: now, shares: shares)
                .isEmpty)
        // The rest wait for a later claim; none is claimed twice.
        let rest = try await store.claimWebhookEvents(
            "w", leaseUntil: now.addingTimeInterval(60), now: now, shares: .unbounded(100))
        #expect(rest.count == 13)
        #expect(Set(rest.map(\.eventID)).isDisjoint(with: (claimed + more).map(\.eventID)))
    }

    @Test("A failing webhook gets one attempt a claim; it shows when its error was met and its next attempt")
    func failingWebhook() async throws {
        let (store, project, job, page, hooks) = try await fixture.claimedSend(4, hooks: [[.deliveryFailed]])
        let id = hooks[0].webhook.id
        _ = try await store.record(
            page.attempts.map { fixture.outcome($0, .failed, "INVALID_ARGUMENT") }, of: job, page: page,
            claimant: "a", leaseUntil: Date(), now: Date())
        let start = Date()
        let waiting = try #require(try await store.webhook(id, of: project.rowID))
        #expect(waiting.nextAttemptAt.map { $0 <= start } == true)
        #expect(waiting.lastErrorAt == nil)
        let first = try await store.claimWebhookEvents(
            "w", leaseUntil: start.addingTimeInterval(60), now: start, shares: WebhookShares(slots: 16))
        #expect(first.count == 4)
        let schedule = WebhookRetrySchedule(waits: [.seconds(3600)])
        for event in first {
            _ = try await store.recordWebhookAttempt(
                event, .failed("no answer within 10 s"), claimant: "w", schedule: schedule, now: start)
        }
        let failing = try #require(try await store.webhook(id, of: project.rowID))
        #expect(failing.lastError == "no answer within 10 s")
        #expect(failing.lastErrorAt.map(EpochMilliseconds.milliseconds) == EpochMilliseconds.milliseconds(start))
        #expect(
            failing.nextAttemptAt.map(EpochMilliseconds.milliseconds)
                == EpochMilliseconds.milliseconds(start.addingTimeInterval(3600)))
        // An hour later all four are due; the failing webhook gets one at a time.
        let later = start.addingTimeInterval(3600)
        let second = try await store.claimWebhookEvents(
            "w", leaseUntil: later.addingTimeInterval(60), now: later, shares: WebhookShares(slots: 16))
        #expect(second.count == 1)
    }

    @Test("Retry now makes a webhook's waiting events due at once, keeping their attempts; another's stay")
    func retryNow() async throws {
        let (store, project, job, page, hooks) = try await fixture.claimedSend(
            2, hooks: [[.deliveryFailed], [.deliveryFailed]])
        _ = try await store.record(
            page.attempts.map { fixture.outcome($0, .failed, "INVALID_ARGUMENT") }, of: job, page: page,
            claimant: "a", leaseUntil: Date(), now: Date())
        let start = Date()
        let schedule = WebhookRetrySchedule(waits: [.seconds(3600), .seconds(3600)])
        for event in try await fixture.queued(store, at: start) {
            _ = try await store.recordWebhookAttempt(
                event, .failed("HTTP 503"), claimant: "w", schedule: schedule, now: start)
        }
        let now = start.addingTimeInterval(60)
        #expect(try await fixture.queued(store, at: now).isEmpty)
        let retried = try #require(try await store.retryWebhook(hooks[0].webhook.id, of: project.rowID, now: now))
        #expect(retried.nextAttemptAt.map(EpochMilliseconds.milliseconds) == EpochMilliseconds.milliseconds(now))
        #expect(retried.backlog == 2 && retried.lastError == "HTTP 503")
        let due = try await fixture.queued(store, at: now)
        #expect(due.count == 2)
        #expect(due.allSatisfy { $0.webhookID == hooks[0].webhook.id && $0.attempts == 1 })
        // The other webhook's events keep their hour.
        let other = try #require(try await store.webhook(hooks[1].webhook.id, of: project.rowID))
        #expect(
            other.nextAttemptAt.map(EpochMilliseconds.milliseconds)
                == EpochMilliseconds.milliseconds(start.addingTimeInterval(3600)))
        #expect(try await store.retryWebhook("wh_none", of: project.rowID, now: now) == nil)
    }
}
