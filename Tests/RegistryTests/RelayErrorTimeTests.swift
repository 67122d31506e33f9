import Foundation
import TestBackends
import Testing

@testable import AudienceEngine
@testable import Registry

/// The relay's last error comes with when it was recorded (`GET /api/relay`'s `lastErrorAt`).
@Suite("Relay: the last error's time", .onEveryBackend)
struct RelayErrorTimeTests {
    @Test("A page's error is recorded with the page's time; a page without one keeps both; a pause's error has its own")
    func lastErrorAt() async throws {
        let (project, store, job, now) = try await OutboxTests().claimedSend(to: 4)
        #expect(try #require(try await store.relayStatus(of: project)).lastErrorAt == nil)
        // Whole milliseconds, as the store keeps times.
        let recordedAt = Date(timeIntervalSince1970: (now.timeIntervalSince1970 * 1000).rounded(.down) / 1000)
        let first = try await store.nextAttempts(of: job, after: nil, now: now, limit: 2)
        let failing = [
            DeliveryOutcome(attempt: first.attempts[0], state: .failed, error: "UNREGISTERED", nextAttemptAt: nil),
            DeliveryOutcome(attempt: first.attempts[1], state: .delivered, error: nil, nextAttemptAt: nil),
        ]
        _ = try await store.record(failing, of: job, page: first, claimant: "a", leaseUntil: now, now: recordedAt)
        let failed = try #require(try await store.relayStatus(of: project))
        #expect(failed.lastError == "UNREGISTERED")
        #expect(failed.lastErrorAt == recordedAt)
        // A later page that went well says nothing of errors: the last one and its time stay.
        let later = recordedAt.addingTimeInterval(60)
        let second = try await store.nextAttempts(of: job, after: nil, now: later, limit: 2)
        let delivered = second.attempts.map {
            DeliveryOutcome(attempt: $0, state: .delivered, error: nil, nextAttemptAt: nil)
        }
        _ = try await store.record(delivered, of: job, page: second, claimant: "a", leaseUntil: later, now: later)
        let kept = try #require(try await store.relayStatus(of: project))
        #expect(kept.lastError == "UNREGISTERED")
        #expect(kept.lastErrorAt == recordedAt)
        // FCM's quota pauses the project: its error is the last, recorded now.
        let before = Date().addingTimeInterval(-1)
        try await store.pause(project: project.rowID, until: Date().addingTimeInterval(30), error: "QUOTA_EXCEEDED")
        let paused = try #require(try await store.relayStatus(of: project))
        #expect(paused.lastError == "QUOTA_EXCEEDED")
        #expect(try #require(paused.lastErrorAt) > before)
        // Lifting the pause records no error, and changes no time.
        try await store.pause(project: project.rowID, until: nil, error: nil)
        #expect(try #require(try await store.relayStatus(of: project)).lastErrorAt == paused.lastErrorAt)
    }
}
