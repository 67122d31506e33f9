import Foundation
import TestBackends
import Testing

@testable import AudienceEngine
@testable import Registry

/// The keys of idempotent sends as the stores keep them: with their message or not at all, held
/// while a direct send waits, answered from what was written once the hold passed, expired and purged.
@Suite("Idempotency keys", .onEveryBackend)
struct IdempotencyStoreTests {
    static let bounds = OutboxBounds(outboxMessages: 10, logEntries: 100, logBytes: 1 << 20)

    /// A topic message to `news` carrying `key`, held `hold` seconds from now when not `complete`.
    static func message(
        _ project: Project, key: String?, complete: Bool = true, hold: TimeInterval = 0, expiresIn: TimeInterval = 3600,
        body: String = "{}", at now: Date = Date()
    ) -> AcceptedMessage {
        let id = "m\(Int.random(in: 0...Int.max))"
        let record = key.map {
            IdempotencyRecord(
                key: $0, fingerprint: "f", messageID: id,
                answer: StoredAnswer(
                    status: 200, headers: [["Content-Type", "application/json"]], body: Array(body.utf8)),
                complete: complete, createdAt: EpochMilliseconds.milliseconds(now),
                lockedUntil: EpochMilliseconds.milliseconds(now.addingTimeInterval(hold)),
                expiresAt: EpochMilliseconds.milliseconds(now.addingTimeInterval(expiresIn)))
        }
        return AcceptedMessage(
            id: id, project: project, via: .legacy, message: Message(target: .topic("news")),
            recipients: RoaringBitmap([1]), receivedAt: now, idempotency: record)
    }

    static func request(_ key: String) throws -> IdempotentRequest {
        var request = IdempotentRequest(key: try IdempotencyKey(header: key), route: "test", canonicalBody: [])
        request.fingerprint = "f"
        return request
    }

    @Test("A key is written with its message, and a second message under a taken key writes nothing")
    func keyWithItsMessage() async throws {
        let (registry, project) = try await makeRegistry()
        let store = try #require(registry.store as? any RegistryBackend)
        try await store.appendMessage(Self.message(project, key: "k"), body: "{}", entries: 100, bytes: 1 << 20)
        await #expect(throws: IdempotencyKeyTaken.self) {
            try await store.appendMessage(Self.message(project, key: "k"), body: "{}", entries: 100, bytes: 1 << 20)
        }
        #expect(try await TestBackend.rowCount("message", in: store) == 1)
        #expect(try await TestBackend.rowCount("idempotencyKey", in: store) == 1)
        // Another project's key of the same name is its own.
        let (other, _) = try await registry.createProject(projectId: "other-app", senderId: "999000999000")
        try await store.appendMessage(Self.message(other, key: "k"), body: "{}", entries: 100, bytes: 1 << 20)
        #expect(try await TestBackend.rowCount("idempotencyKey", in: store) == 2)
    }

    @Test("A relayed message and its key go in one transaction: an outbox that refuses the message takes no key")
    func outboxAndKeyTogether() async throws {
        let (registry, project) = try await makeRegistry()
        let store = try #require(registry.store as? any RegistryBackend)
        try await store.setRelay(OutboxTests.settings, for: project)
        func enqueue(_ message: AcceptedMessage, outbox: Int) async throws {
            _ = try await store.enqueue(
                message, body: "{}", template: "{}", deadline: Date().addingTimeInterval(60), direct: nil,
                claimant: nil,
                leaseUntil: Date(), bounds: OutboxBounds(outboxMessages: outbox, logEntries: 100, logBytes: 1 << 20))
        }
        await #expect(throws: OutboxFull.self) { try await enqueue(Self.message(project, key: "k"), outbox: 0) }
        #expect(try await store.idempotencyKey("k", in: project.rowID, now: EpochMilliseconds.now()) == nil)
        #expect(try await TestBackend.rowCount("message", in: store) == 0)
        try await enqueue(Self.message(project, key: "k"), outbox: 10)
        await #expect(throws: IdempotencyKeyTaken.self) {
            try await enqueue(Self.message(project, key: "k"), outbox: 10)
        }
        #expect(try await TestBackend.rowCount("outbox", in: store) == 1)
        #expect(try await TestBackend.rowCount("message", in: store) == 1)
    }

    @Test("A key held for a direct send is in progress until its hold passes; then what was written answers")
    func holdPasses() async throws {
        let (registry, project) = try await makeRegistry()
        let store = try #require(registry.store as? any RegistryBackend)
        let held = Self.message(project, key: "held", complete: false, hold: 60, body: #"{"provisional":1}"#)
        try await store.appendMessage(held, body: "{}", entries: 100, bytes: 1 << 20)
        guard case .inProgress = try await registry.idempotencyVerdict(Self.request("held"), in: project) else {
            Issue.record("a held key is in progress")
            return
        }
        // The server that held it died: once the hold passed, the key answers with the answer
        // written with the message, and is never stuck.
        let orphan = Self.message(project, key: "orphan", complete: false, hold: -1, body: #"{"provisional":2}"#)
        try await store.appendMessage(orphan, body: "{}", entries: 100, bytes: 1 << 20)
        guard case .replay(let answer) = try await registry.idempotencyVerdict(Self.request("orphan"), in: project)
        else {
            Issue.record("a key whose hold passed replays")
            return
        }
        #expect(String(decoding: answer.body, as: UTF8.self) == #"{"provisional":2}"#)
        #expect(answer.headers == [["Content-Type", "application/json"]])
        // The sender that lives on completes it, once.
        let final = StoredAnswer(status: 404, headers: [], body: Array(#"{"final":1}"#.utf8))
        _ = try await registry.completeIdempotentSend(try #require(held.idempotency), in: project, answer: final)
        guard case .replay(let completed) = try await registry.idempotencyVerdict(Self.request("held"), in: project)
        else {
            Issue.record("a completed key replays")
            return
        }
        #expect(completed == final)
        #expect(
            try await !store.completeIdempotencyKey(
                "held", in: project.rowID, messageID: try #require(held.idempotency).messageID, answer: final))
        guard
            case .mismatch = try await registry.idempotencyVerdict(
                IdempotentRequest(key: IdempotencyKey(header: "held"), route: "other", canonicalBody: []), in: project)
        else {
            Issue.record("another request under the key is a mismatch")
            return
        }
    }

    @Test("An expired key is gone to readers, gives way to a new message, and keyed sends purge a bounded batch")
    func expiryAndPurge() async throws {
        let (registry, project) = try await makeRegistry()
        let store = try #require(registry.store as? any RegistryBackend)
        let now = Date()
        for n in 0..<20 {
            try await store.appendMessage(
                Self.message(project, key: "old\(n)", expiresIn: 60 + Double(n), at: now), body: "{}", entries: 100,
                bytes: 1 << 20)
        }
        #expect(try await TestBackend.rowCount("idempotencyKey", in: store) == 20)
        // Two minutes on, they have expired.
        let later = now.addingTimeInterval(120)
        #expect(
            try await store.idempotencyKey("old19", in: project.rowID, now: EpochMilliseconds.milliseconds(later))
                == nil)
        #expect(
            try await store.idempotencyKey("old19", in: project.rowID, now: EpochMilliseconds.milliseconds(now)) != nil)
        guard case .new = try await registry.idempotencyVerdict(Self.request("old19"), in: project, now: later) else {
            Issue.record("an expired key is free")
            return
        }
        // One keyed send deletes a batch of expired keys, not all of them.
        try await store.appendMessage(
            Self.message(project, key: "fresh", at: later), body: "{}", entries: 100, bytes: 1 << 20)
        #expect(try await TestBackend.rowCount("idempotencyKey", in: store) == 20 - IdempotencyRecord.purgeBatch + 1)
        // The oldest went first; an expired key still in the table gives way to a new message under it.
        #expect(
            try await store.idempotencyKey("old19", in: project.rowID, now: EpochMilliseconds.milliseconds(now)) != nil)
        #expect(
            try await store.idempotencyKey("old0", in: project.rowID, now: EpochMilliseconds.milliseconds(now)) == nil)
        try await store.appendMessage(
            Self.message(project, key: "old19", body: #"{"new":1}"#, at: later), body: "{}", entries: 100,
            bytes: 1 << 20)
        let renewed = try await store.idempotencyKey(
            "old19", in: project.rowID, now: EpochMilliseconds.milliseconds(later))
        #expect(renewed.map { String(decoding: $0.answer.body, as: UTF8.self) } == #"{"new":1}"#)
    }

    @Test(
        "A key is 1 to 255 printable ASCII characters; the draft's quoted form names the same key",
        arguments: [
            ("abc", "abc"), (#""abc""#, "abc"), (#""a\"b""#, #"a"b"#), ("a b", "a b"),
            (String(repeating: "k", count: 255), String(repeating: "k", count: 255)),
        ])
    func validKeys(header: String, key: String) throws {
        #expect(try IdempotencyKey(header: header).value == key)
    }

    @Test(
        "Empty, longer than 255, or not printable ASCII: refused",
        arguments: [
            "", #""""#, String(repeating: "k", count: 256), "tab\there", "clé", "nul\u{0}", #""a"b""#, #""a\x""#,
        ])
    func invalidKeys(header: String) {
        #expect(throws: IdempotencyKeyInvalid.self) { try IdempotencyKey(header: header) }
    }

    @Test("The fingerprint does not depend on spacing or key order, and tells routes and bodies apart")
    func fingerprints() throws {
        let key = try IdempotencyKey(header: "k")
        let a = try JSONDecoder().decode(
            [String: JSONValue].self, from: Data(#"{"to":"x","data":{"a":1,"b":"2"}}"#.utf8))
        let b = try JSONDecoder().decode(
            [String: JSONValue].self, from: Data(" { \"data\" : { \"b\":\"2\", \"a\":1.0 }, \"to\":\"x\" } ".utf8))
        let c = try JSONDecoder().decode(
            [String: JSONValue].self, from: Data(#"{"to":"x","data":{"a":2,"b":"2"}}"#.utf8))
        let route = "POST /fcm/send"
        #expect(
            IdempotentRequest(key: key, route: route, canonicalBody: IdempotentRequest.canonical(a))
                == IdempotentRequest(key: key, route: route, canonicalBody: IdempotentRequest.canonical(b)))
        #expect(
            IdempotentRequest(key: key, route: route, canonicalBody: IdempotentRequest.canonical(a)).fingerprint
                != IdempotentRequest(key: key, route: route, canonicalBody: IdempotentRequest.canonical(c)).fingerprint)
        #expect(
            IdempotentRequest(key: key, route: route, canonicalBody: IdempotentRequest.canonical(a)).fingerprint
                != IdempotentRequest(key: key, route: "POST /v1", canonicalBody: IdempotentRequest.canonical(a))
                .fingerprint)
    }
}
