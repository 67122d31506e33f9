import AudienceEngine
import Foundation
import Registry
import RegistryPostgres
import Testing

@Suite("PostgreSQL: the relay's outbox, worked by several servers", .enabled(if: TestPostgres.available, TestPostgres.skipped))
struct PostgresOutboxTests {
    static let settings = OutboxTests.settings
    static let bounds = OutboxBounds(outboxMessages: 100, logEntries: 1000, logBytes: 1 << 24)

    func token(_ n: Int) -> String { "po\(n):APA91b" + String(repeating: "o", count: 40) }

    /// A relaying project with tokens 1…count subscribed to "news".
    func relaying(_ count: Int, _ body: (PostgresStore, Project) async throws -> Void) async throws {
        try await TestPostgres.withProject { store, project in
            try await store.setRelay(Self.settings, for: project)
            _ = try await store.subscribe((1...count).map(token), to: "news", topicLimit: 9, in: project)
            try await body(store, project)
        }
    }

    func enqueue(_ store: PostgresStore, _ project: Project, _ recipients: [UInt32], bounds: OutboxBounds = bounds)
        async throws -> Int64
    {
        try await store.enqueue(
            AcceptedMessage(
                id: "m\(UInt64.random(in: 0...UInt64.max))", project: project, via: .legacy,
                message: Message(target: .topic("news")), recipients: RoaringBitmap(recipients), receivedAt: Date()),
            body: "{}", template: "{}", deadline: Date().addingTimeInterval(60), direct: nil, claimant: nil,
            leaseUntil: Date(), bounds: bounds)
    }

    @Test("A walk: claimed by one server, paged, recorded by its holder only, finished, listed and counted")
    func walk() async throws {
        try await relaying(5) { store, project in
            _ = try await enqueue(store, project, [1, 2, 3, 4, 5])
            let now = Date()
            let job = try #require(try await store.claim("a", leaseUntil: now.addingTimeInterval(30), now: now, limit: 5).first)
            #expect(try await store.claim("b", leaseUntil: now.addingTimeInterval(30), now: now, limit: 5).isEmpty)
            let first = try await store.nextAttempts(of: job, after: nil, now: now, limit: 3)
            #expect(first.attempts.map(\.tokenID) == [1, 2, 3])
            let outcomes = [
                DeliveryOutcome(attempt: first.attempts[0], state: .delivered, error: nil, nextAttemptAt: nil),
                DeliveryOutcome(attempt: first.attempts[1], state: .failed, error: "UNREGISTERED", nextAttemptAt: nil),
                DeliveryOutcome(attempt: first.attempts[2], state: .pending, error: "UNAVAILABLE", nextAttemptAt: now),
            ]
            #expect(try await store.record(outcomes, of: job, page: first, claimant: "b", leaseUntil: now, now: now) == nil)
            let progress = try await store.record(outcomes, of: job, page: first, claimant: "a", leaseUntil: now.addingTimeInterval(30), now: now)
            #expect(progress?.finished == false)
            let second = try await store.nextAttempts(of: job, after: nil, now: now, limit: 10)
            #expect(second.attempts.map(\.tokenID) == [3, 4, 5])
            #expect(second.walked)
            let rest = second.attempts.map { DeliveryOutcome(attempt: $0, state: .delivered, error: nil, nextAttemptAt: nil) }
            #expect(try await store.record(rest, of: job, page: second, claimant: "a", leaseUntil: now, now: now)?.finished == true)
            let message = try #require(try await store.messages(.all, in: project, before: nil, limit: 1, bytes: 1 << 20).items.first)
            #expect(try await store.delivery(ofMessage: message.id, in: project) == DeliveryCounts(pending: 0, delivered: 4, failed: 1))
            let delivered = try #require(try await store.deliveries(ofMessage: message.id, in: project, state: .delivered, after: nil, limit: 10))
            #expect(delivered.items.map(\.token).sorted() == [1, 3, 4, 5].map(token).sorted())
            let failed = try #require(try await store.deliveries(ofMessage: message.id, in: project, state: .failed, after: nil, limit: 10))
            #expect(failed.items.map(\.error) == ["UNREGISTERED"])
            let status = try #require(try await store.relayStatus(of: project))
            #expect((status.delivered, status.failed, status.pending, status.inFlight) == (4, 1, 0, 0))
            #expect(status.lastError == "UNAVAILABLE")
        }
    }

    @Test("Four servers claiming at once take each of 40 jobs exactly once; an expired lease is taken over")
    func claims() async throws {
        try await relaying(2) { store, project in
            for _ in 0..<40 { _ = try await enqueue(store, project, [1, 2]) }
            let now = Date()
            let claimed = try await withThrowingTaskGroup(of: [Int64].self) { group in
                for server in 0..<4 {
                    group.addTask {
                        var mine: [Int64] = []
                        while true {
                            let jobs = try await store.claim("s\(server)", leaseUntil: now.addingTimeInterval(30), now: now, limit: 3)
                            if jobs.isEmpty { return mine }
                            mine += jobs.map(\.id)
                        }
                    }
                }
                return try await group.reduce(into: []) { $0 += $1 }
            }
            #expect(claimed.count == 40)
            #expect(Set(claimed).count == 40)
            // Past every lease, another server takes a job over; the old holder's record is refused.
            let later = now.addingTimeInterval(31)
            let taken = try #require(try await store.claim("new", leaseUntil: later.addingTimeInterval(30), now: later, limit: 1).first)
            let page = try await store.nextAttempts(of: taken, after: nil, now: later, limit: 10)
            let outcomes = page.attempts.map { DeliveryOutcome(attempt: $0, state: .delivered, error: nil, nextAttemptAt: nil) }
            for server in 0..<4 {
                #expect(try await store.record(outcomes, of: taken, page: page, claimant: "s\(server)", leaseUntil: later, now: later) == nil)
            }
            #expect(try await store.record(outcomes, of: taken, page: page, claimant: "new", leaseUntil: later, now: later)?.finished == true)
        }
    }

    @Test("The outbox's bound holds when sends arrive at once, and a refused send writes nothing")
    func bound() async throws {
        try await relaying(1) { store, project in
            let bounds = OutboxBounds(outboxMessages: 5, logEntries: 1000, logBytes: 1 << 24)
            let taken = try await withThrowingTaskGroup(of: Bool.self) { group in
                for _ in 0..<12 {
                    group.addTask {
                        do {
                            _ = try await enqueue(store, project, [1], bounds: bounds)
                            return true
                        } catch is OutboxFull {
                            return false
                        }
                    }
                }
                return try await group.reduce(0) { $0 + ($1 ? 1 : 0) }
            }
            #expect(taken == 5)
            #expect(try await store.messages(.all, in: project, before: nil, limit: 100, bytes: 1 << 24).items.count == 5)
        }
    }
}
