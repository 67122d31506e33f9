@testable import AudienceEngine
import Foundation
@testable import Registry
import TestBackends
import Testing

/// The relay's outbox in the store: what the log keeps, who may work a job, and how a walk of the
/// recipients goes on from its cursor.
@Suite("Outbox", .onEveryBackend)
struct OutboxTests {
    /// Settings a store keeps without reading them: only a channel does.
    static let settings = ChannelSettings(
        channel: "fcm-v1", settings: ["firebaseProjectId": .string("fb"), "upstream": .string("https://u")],
        secrets: ["privateKey": .string("k")])

    /// A relaying project with `count` subscribers of `news`, and its store.
    func relaying(_ count: Int) async throws -> (RegistryService, Project, any RegistryBackend) {
        let (registry, project) = try await makeRegistry()
        _ = try await registry.subscribe((1...count).map(token), to: "news", in: project)
        let store = try #require(registry.store as? any RegistryBackend)
        try await store.setRelay(Self.settings, for: project)
        return (registry, project, store)
    }

    func enqueue(_ store: any RegistryBackend, _ project: Project, _ recipients: RoaringBitmap, bounds: OutboxBounds) async throws
        -> Int64
    {
        let message = AcceptedMessage(
            id: "m\(Int.random(in: 0...Int.max))", project: project, via: .legacy, message: Message(target: .topic("news")),
            recipients: recipients, receivedAt: Date())
        return try await store.enqueue(
            message, body: "{}", template: "{}", deadline: Date().addingTimeInterval(60), direct: nil, claimant: nil,
            leaseUntil: Date(), bounds: bounds)
    }

    /// A topic send to `count` subscribers (tokens 1…count), its job claimed by server "a".
    func claimedSend(to count: Int) async throws -> (Project, any RegistryBackend, OutboxJob, Date) {
        let (_, project, store) = try await relaying(count)
        let bounds = OutboxBounds(outboxMessages: 10, logEntries: 100, logBytes: 1 << 20)
        _ = try await enqueue(store, project, RoaringBitmap((1...count).map(UInt32.init)), bounds: bounds)
        let now = Date()
        let job = try #require(try await store.claim("a", leaseUntil: now.addingTimeInterval(30), now: now, limit: 1).first)
        return (project, store, job, now)
    }

    @Test("The log keeps every undelivered message whatever its bounds; the outbox has its own")
    func logKeepsUndelivered() async throws {
        let (_, project, store) = try await relaying(3)
        let bounds = OutboxBounds(outboxMessages: 3, logEntries: 1, logBytes: 1 << 20)
        for _ in 0..<3 { _ = try await enqueue(store, project, RoaringBitmap([1, 2, 3]), bounds: bounds) }
        let count = try await TestBackend.rowCount("message", in: store)
        #expect(count == 3)
        await #expect(throws: OutboxFull.self) {
            _ = try await enqueue(store, project, RoaringBitmap([1]), bounds: bounds)
        }
        let after = try await TestBackend.rowCount("message", in: store)
        #expect(after == 3)  // the refused send wrote nothing
    }

    @Test("A claim skips the projects a server already works its share of; a server started again takes its claims back")
    func claimsSkipProjectsAndComeBack() async throws {
        let (registry, project, store) = try await relaying(3)
        let (other, _) = try await registry.createProject(projectId: "other", senderId: "999")
        try await store.setRelay(Self.settings, for: other)
        _ = try await registry.subscribe(["x"], to: "news", in: other)
        let bounds = OutboxBounds(outboxMessages: 10, logEntries: 100, logBytes: 1 << 20)
        _ = try await enqueue(store, project, RoaringBitmap([1, 2, 3]), bounds: bounds)
        let message = AcceptedMessage(
            id: "o1", project: other, via: .legacy, message: Message(target: .topic("news")), recipients: RoaringBitmap([4]),
            receivedAt: Date())
        _ = try await store.enqueue(
            message, body: "{}", template: "{}", deadline: Date().addingTimeInterval(60), direct: nil, claimant: nil,
            leaseUntil: Date(), bounds: bounds)
        let now = Date()
        // The first project's job is older, but the server works its share of that project.
        let taken = try await store.claim(
            "a", leaseUntil: now.addingTimeInterval(30), now: now, limit: 5, skipping: [project.rowID])
        #expect(taken.map(\.project) == [other.rowID])
        #expect(try await store.claim("a", leaseUntil: now.addingTimeInterval(30), now: now, limit: 5).map(\.project) == [project.rowID])
        // "a" dies and starts again: its claims are free at once, not after their lease.
        #expect(try await store.claim("b", leaseUntil: now.addingTimeInterval(30), now: now, limit: 5).isEmpty)
        try await store.releaseAll(claimedBy: "a")
        #expect(try await store.claim("a", leaseUntil: now.addingTimeInterval(30), now: now, limit: 5).count == 2)
    }

    @Test("A job given back after its turn goes behind the jobs that waited meanwhile")
    func turnsGoRoundRobin() async throws {
        let (_, project, store) = try await relaying(3)
        let bounds = OutboxBounds(outboxMessages: 10, logEntries: 100, logBytes: 1 << 20)
        let first = try await enqueue(store, project, RoaringBitmap([1, 2, 3]), bounds: bounds)
        let second = try await enqueue(store, project, RoaringBitmap([1, 2, 3]), bounds: bounds)
        let now = Date().addingTimeInterval(1)
        let taken = try #require(try await store.claim("a", leaseUntil: now.addingTimeInterval(30), now: now, limit: 1).first)
        #expect(taken.id == first)
        try await store.release(taken, claimant: "a", notBefore: now)
        let later = now.addingTimeInterval(1)
        let next = try await store.claim("a", leaseUntil: later.addingTimeInterval(30), now: later, limit: 1)
        #expect(next.map(\.id) == [second])
        #expect(try await store.claim("a", leaseUntil: later.addingTimeInterval(30), now: later, limit: 1).map(\.id) == [first])
    }

    @Test("A direct send given back is claimed before fan-outs, even of a project the server works its share of")
    func directSendsFirst() async throws {
        let (_, project, store) = try await relaying(3)
        let bounds = OutboxBounds(outboxMessages: 10, logEntries: 100, logBytes: 1 << 20)
        _ = try await enqueue(store, project, RoaringBitmap([1, 2, 3]), bounds: bounds)
        let message = AcceptedMessage(
            id: "d1", project: project, via: .legacy, message: Message(target: .token(token(1))),
            recipients: RoaringBitmap([1]), receivedAt: Date())
        let direct = try await store.enqueue(
            message, body: "{}", template: "{}", deadline: Date().addingTimeInterval(60), direct: [token(1)],
            claimant: nil, leaseUntil: Date(), bounds: bounds)
        let now = Date().addingTimeInterval(1)
        let taken = try await store.claim(
            "a", leaseUntil: now.addingTimeInterval(30), now: now, limit: 1, skipping: [project.rowID])
        #expect(taken.map(\.id) == [direct])
        #expect(taken.first?.isDirect == true)
    }

    @Test("A job is claimed by one server at a time, recorded only by its holder, and taken over after its lease")
    func claimsAndLeases() async throws {
        let (_, project, store) = try await relaying(5)
        let bounds = OutboxBounds(outboxMessages: 10, logEntries: 100, logBytes: 1 << 20)
        _ = try await enqueue(store, project, RoaringBitmap([1, 2, 3, 4, 5]), bounds: bounds)
        let now = Date()
        let mine = try await store.claim("a", leaseUntil: now.addingTimeInterval(30), now: now, limit: 4)
        #expect(mine.count == 1)
        #expect(try await store.claim("b", leaseUntil: now.addingTimeInterval(30), now: now, limit: 4).isEmpty)
        let job = try #require(mine.first)
        let page = try await store.nextAttempts(of: job, after: nil, now: now, limit: 2)
        #expect(page.attempts.map(\.tokenID) == [1, 2])
        #expect(!page.walked)
        // After the lease, another server takes the job over, and the first may no longer record.
        let later = now.addingTimeInterval(31)
        #expect(try await store.claim("b", leaseUntil: later.addingTimeInterval(30), now: later, limit: 4).count == 1)
        let delivered = page.attempts.map { DeliveryOutcome(attempt: $0, state: .delivered, error: nil, nextAttemptAt: nil) }
        #expect(
            try await store.record(delivered, of: job, page: page, claimant: "a", leaseUntil: later, now: later) == nil)
        let progress = try await store.record(delivered, of: job, page: page, claimant: "b", leaseUntil: later, now: later)
        #expect(progress == JobProgress(finished: false, nextRetryAt: nil))
        // The walk goes on after the cursor; a retry waits its time.
        let rest = try await store.nextAttempts(of: job, after: nil, now: later, limit: 10)
        #expect(rest.attempts.map(\.tokenID) == [3, 4, 5])
        #expect(rest.walked)
        let outcomes = [
            DeliveryOutcome(attempt: rest.attempts[0], state: .delivered, error: nil, nextAttemptAt: nil),
            DeliveryOutcome(attempt: rest.attempts[1], state: .failed, error: "UNREGISTERED", nextAttemptAt: nil),
            DeliveryOutcome(
                attempt: rest.attempts[2], state: .pending, error: "UNAVAILABLE", nextAttemptAt: later.addingTimeInterval(5)),
        ]
        let waiting = try await store.record(outcomes, of: job, page: rest, claimant: "b", leaseUntil: later, now: later)
        #expect(waiting?.finished == false)
        #expect(try await store.nextAttempts(of: job, after: nil, now: later, limit: 10).isEmpty)
        let due = try await store.nextAttempts(of: job, after: nil, now: later.addingTimeInterval(6), limit: 10)
        #expect(due.attempts.map(\.attempts) == [1])
        let last = [DeliveryOutcome(attempt: due.attempts[0], state: .delivered, error: nil, nextAttemptAt: nil)]
        let done = try await store.record(last, of: job, page: due, claimant: "b", leaseUntil: later, now: later)
        #expect(done?.finished == true)
        #expect(try await store.delivery(ofMessage: job.messageID, in: project) == DeliveryCounts(pending: 0, delivered: 4, failed: 1))
    }

    @Test("A page read while another is in flight skips its retries and goes on from its cursor")
    func readAhead() async throws {
        let (_, store, job, now) = try await claimedSend(to: 6)
        let first = try await store.nextAttempts(of: job, after: nil, now: now, limit: 2)
        let retry = [
            DeliveryOutcome(attempt: first.attempts[0], state: .pending, error: "UNAVAILABLE", nextAttemptAt: now),
            DeliveryOutcome(attempt: first.attempts[1], state: .delivered, error: nil, nextAttemptAt: nil),
        ]
        _ = try await store.record(retry, of: job, page: first, claimant: "a", leaseUntil: now, now: now)
        // Token 1 is due again; the page in flight holds it, so the page after it does not.
        let inFlight = try await store.nextAttempts(of: job, after: nil, now: now, limit: 2)
        #expect(inFlight.attempts.map(\.tokenID) == [1, 3])
        let ahead = try await store.nextAttempts(of: job, after: inFlight, now: now, limit: 2)
        #expect(ahead.attempts.map(\.tokenID) == [4, 5])
        #expect(try await store.nextAttempts(of: job, after: nil, now: now, limit: 2).attempts.map(\.tokenID) == [1, 3])
    }

    @Test("A walk's first-attempt deliveries write no row, and the delivered listing still names each, page by page")
    func deliveredWithoutRows() async throws {
        let (project, store, job, now) = try await claimedSend(to: 5)
        let page = try await store.nextAttempts(of: job, after: nil, now: now, limit: 4)
        let outcomes = page.attempts.map { attempt in
            attempt.tokenID == 2
                ? DeliveryOutcome(attempt: attempt, state: .failed, error: "UNREGISTERED", nextAttemptAt: nil)
                : DeliveryOutcome(attempt: attempt, state: .delivered, error: nil, nextAttemptAt: nil)
        }
        _ = try await store.record(outcomes, of: job, page: page, claimant: "a", leaseUntil: now, now: now)
        let rows = try await TestBackend.rowCount("delivery", in: store)
        #expect(rows == 1)  // the failure only
        #expect(try await store.delivery(ofMessage: job.messageID, in: project) == DeliveryCounts(pending: 1, delivered: 3, failed: 1))
        let first = try #require(
            try await store.deliveries(ofMessage: job.messageID, in: project, state: .delivered, after: nil, limit: 2))
        #expect(first.items.map(\.token) == [token(1), token(3)])
        #expect(first.items.allSatisfy { $0.attempts == 1 && $0.error == nil && $0.state == .delivered })
        let next = try #require(first.nextAfter.flatMap { Int64($0) })
        let second = try #require(
            try await store.deliveries(ofMessage: job.messageID, in: project, state: .delivered, after: next, limit: 2))
        #expect(second.items.map(\.token) == [token(4)])  // token 5 is not walked yet
        #expect(second.nextAfter == nil)
        let failed = try await store.deliveries(ofMessage: job.messageID, in: project, state: .failed, after: nil, limit: 10)
        #expect(failed?.items.map(\.token) == [token(2)])
        // A page token made up past every token id (walk positions start at 2^40 on both backends)
        // is an empty page, in each state.
        for state in DeliveryState.allCases {
            let past = try await store.deliveries(
                ofMessage: job.messageID, in: project, state: state, after: (1 << 40) + (1 << 33), limit: 10)
            #expect(past?.items.isEmpty == true)
        }
    }
}
