import Foundation
import TestBackends
import Testing

@testable import Registry

/// Cancelling a relayed message in the store: it finishes at once, what had no outcome is
/// cancelled without a row per recipient, a page in flight records nothing, and the completion is
/// told once with the cancelled counted.
@Suite("Cancelling a message", .onEveryBackend)
struct OutboxCancelTests {
    @Test("A fan-out cancelled half way keeps what was told, cancels the rest, and is claimed no more")
    func cancelHalfWay() async throws {
        let hooks = WebhookTests()
        let (store, project, job, _, _) = try await hooks.claimedSend(6, hooks: [[.messageCompleted]])
        let now = Date()
        // Token 1 delivered, token 2 waiting for a retry; tokens 3 and 4 out when the cancel lands.
        let first = try await store.nextAttempts(of: job, after: nil, now: now, limit: 2)
        _ = try await store.record(
            [hooks.outcome(first.attempts[0], .delivered), hooks.outcome(first.attempts[1], .pending, "UNAVAILABLE")],
            of: job, page: first, claimant: "a", leaseUntil: now.addingTimeInterval(30), now: now)
        let inFlight = try await store.nextAttempts(of: job, after: nil, now: now, limit: 2)
        #expect(inFlight.attempts.map(\.tokenID) == [3, 4])

        let counts = try await store.cancel(message: job.messageID, in: project, now: now)
        #expect(counts == DeliveryCounts(pending: 0, delivered: 1, failed: 0, cancelled: 5))
        #expect(try await store.delivery(ofMessage: job.messageID, in: project) == counts)

        // The page that was out records nothing, and no server claims the job again.
        let late = try await store.record(
            inFlight.attempts.map { hooks.outcome($0, .delivered) }, of: job, page: inFlight, claimant: "a",
            leaseUntil: now.addingTimeInterval(30), now: now)
        #expect(late == nil)
        let later = now.addingTimeInterval(3600)
        #expect(try await store.claim("b", leaseUntil: later.addingTimeInterval(30), now: later, limit: 10).isEmpty)
        #expect(try await store.delivery(ofMessage: job.messageID, in: project) == counts)

        // The listing reads the retry's row and the recipients never walked as cancelled.
        let cancelled = try #require(
            try await store.deliveries(ofMessage: job.messageID, in: project, state: .cancelled, after: nil, limit: 10))
        #expect(cancelled.items.map(\.token) == [2, 3, 4, 5, 6].map(token))
        #expect(cancelled.items.allSatisfy { $0.state == .cancelled })
        #expect(cancelled.items.first?.error == "UNAVAILABLE")  // what the last attempt met is kept
        let pending = try await store.deliveries(
            ofMessage: job.messageID, in: project, state: .pending, after: nil, limit: 10)
        #expect(pending?.items.isEmpty == true)
        let delivered = try await store.deliveries(
            ofMessage: job.messageID, in: project, state: .delivered, after: nil, limit: 10)
        #expect(delivered?.items.map(\.token) == [token(1)])

        // The completion is told once, with the cancelled counted; a second cancel is refused.
        let queued = try await hooks.queued(store)
        #expect(queued.map(\.type) == ["message.completed"])
        let data = try hooks.data(try #require(queued.first))
        #expect(data["delivered"] as? Int == 1)
        #expect(data["failed"] as? Int == 0)
        #expect(data["cancelled"] as? Int == 5)
        await #expect(throws: RegistryError.messageFinished) {
            _ = try await store.cancel(message: job.messageID, in: project, now: later)
        }
        #expect(try await hooks.queued(store, at: later).count == 1)
    }

    @Test("A finished message cannot be cancelled, and its completion does not speak of cancelling")
    func finishedMessage() async throws {
        let hooks = WebhookTests()
        let (store, project, job, page, _) = try await hooks.claimedSend(2, hooks: [[.messageCompleted]])
        let progress = try await store.record(
            page.attempts.map { hooks.outcome($0, .delivered) }, of: job, page: page, claimant: "a",
            leaseUntil: Date(), now: Date())
        #expect(progress?.finished == true)
        await #expect(throws: RegistryError.messageFinished) {
            _ = try await store.cancel(message: job.messageID, in: project, now: Date())
        }
        #expect(try await store.delivery(ofMessage: job.messageID, in: project) == DeliveryCounts(pending: 0, delivered: 2, failed: 0))
        let data = try hooks.data(try #require(try await hooks.queued(store).first))
        #expect(data["cancelled"] == nil)
        #expect(try await store.cancel(message: "never-sent", in: project, now: Date()) == nil)
    }

    @Test("A token's view of a cancelled message: delivered where the walk passed, cancelled where it did not")
    func tokenView() {
        let job = LoggedJob(
            id: 1, recipients: 4, delivered: 1, failed: 0, cursor: 2, walked: false, isDirect: false, finished: true,
            cancelled: true)
        #expect(job.delivery(toTokenID: 2).state == .delivered)
        #expect(job.delivery(toTokenID: 3).state == .cancelled)
        var retried = job
        retried.row = TokenDelivery(state: .pending, error: "UNAVAILABLE", attempts: 1)
        #expect(retried.delivery(toTokenID: 1) == TokenDelivery(state: .cancelled, error: "UNAVAILABLE", attempts: 1))
        var relayOff = job
        relayOff.cancelled = false
        #expect(relayOff.delivery(toTokenID: 3).state == .failed)
    }
}
