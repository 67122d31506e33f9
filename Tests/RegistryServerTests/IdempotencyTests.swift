import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Logging
import Registry
import RegistryServer
import TestBackends
import Testing
import XMPPServer

/// `Idempotency-Key` on the send routes: replays byte for byte, 422 for another request, 400 for
/// a bad key, nothing kept for a refused request, per project, across servers, for a while.
@Suite("Idempotent sends", .onEveryBackend)
struct IdempotencyTests {
    /// A response as bytes, for byte-for-byte comparisons.
    struct Raw: Sendable {
        var status: HTTPResponse.Status
        var headers: HTTPFields
        var body: String
        var json: JSON? { try? JSONDecoder().decode(JSON.self, from: Data(body.utf8)) }
        var replayed: String? { headers[HTTPField.Name("Idempotent-Replayed")!] }
    }

    static func send(_ client: Fixture.Client, _ body: String, key: String?, auth: String? = nil) async throws -> Raw {
        try await send(client, "/fcm/send", body, key: key, auth: auth)
    }

    static func send(
        _ client: Fixture.Client, _ uri: String, _ body: String, key: String?,
        contentType: String = "application/json", auth: String? = nil
    ) async throws -> Raw {
        var headers: HTTPFields = [.authorization: auth ?? "key=\(client.key)", .contentType: contentType]
        if let key { headers[HTTPField.Name("Idempotency-Key")!] = key }
        return try await client.client.execute(
            uri: uri, method: .post, headers: headers, body: ByteBuffer(string: body)
        ) { Raw(status: $0.status, headers: $0.headers, body: String(buffer: $0.body)) }
    }

    static func logged(_ client: Fixture.Client) async throws -> Int {
        try await client.call(.get, "/api/messages").json?["messages"]?.array?.count ?? -1
    }

    /// A fixture with tokens 1–3 subscribed to "news".
    static func withNews(
        _ fixture: Fixture? = nil, _ body: @escaping @Sendable (Fixture.Client) async throws -> Void
    ) async throws {
        let fixture = if let fixture { fixture } else { try await Fixture.make() }
        try await fixture.test { client in
            _ = try await client.call(
                .post, "/iid/v1:batchAdd",
                body: #"{"to":"/topics/news","registration_tokens":\#(jsonArray((1...3).map(token)))}"#)
            try await body(client)
        }
    }

    @Test("A repeat with the key gets the first answer byte for byte, marked replayed, and sends nothing")
    func legacyReplay() async throws {
        try await Self.withNews { client in
            let first = try await Self.send(client, #"{"to":"/topics/news","data":{"a":"1","b":"2"}}"#, key: "order-1")
            #expect(first.status == .ok)
            #expect(first.replayed == nil)
            // The same request, spaced and ordered otherwise.
            let again = try await Self.send(
                client, #"{ "data": {"b":"2", "a":"1"},  "to": "/topics/news" }"#, key: "order-1")
            #expect(again.status == .ok)
            #expect(again.body == first.body)
            #expect(again.replayed == "true")
            #expect(again.headers[.contentType] == first.headers[.contentType])
            #expect(try await Self.logged(client) == 1)
            // A multicast's random multicast_id comes back as it was.
            let body = #"{"registration_ids":["\#(token(1))","\#(token(2))"],"data":{"a":"b"}}"#
            let multicast = try await Self.send(client, body, key: "order-2")
            let repeated = try await Self.send(client, body, key: "order-2")
            #expect(multicast.json?["success"] == 2)
            #expect(repeated.body == multicast.body)
            #expect(try await Self.logged(client) == 2)
        }
    }

    @Test("HTTP v1 and the legacy plain-text form replay too")
    func v1AndPlainText() async throws {
        try await Self.withNews { client in
            let uri = "/v1/projects/test-app/messages:send"
            let body = #"{"message":{"token":"\#(token(1))","data":{"k":"v"}}}"#
            let first = try await Self.send(client, uri, body, key: "v1-key")
            #expect(first.status == .ok)
            let again = try await Self.send(client, uri, body, key: "v1-key")
            #expect(again.body == first.body)
            #expect(again.replayed == "true")
            let form = "registration_id=\(token(2))&data.a=b"
            let plain = try await Self.send(
                client, "/fcm/send", form, key: "form-key", contentType: "application/x-www-form-urlencoded")
            #expect(plain.body.hasPrefix("id="))
            let plainAgain = try await Self.send(
                client, "/fcm/send", "data.a=b&registration_id=\(token(2))", key: "form-key",
                contentType: "application/x-www-form-urlencoded")
            #expect(plainAgain.body == plain.body)
            #expect(plainAgain.headers[.contentType] == "text/plain; charset=UTF-8")
            #expect(plainAgain.replayed == "true")
            #expect(try await Self.logged(client) == 2)
        }
    }

    @Test("A refusal after the message was written is the answer kept: v1's 404 for an unregistered token")
    func keptRefusal() async throws {
        try await Self.withNews { client in
            // Token 9 was reported dead: in the emulator a send to it is refused, and nothing logged.
            _ = try await client.call(.put, "/api/tokens/\(token(9))")
            _ = try await client.call(.delete, "/api/tokens/\(token(9))")
            let body = #"{"registration_ids":["\#(token(1))","\#(token(9))"],"data":{"a":"b"}}"#
            let first = try await Self.send(client, body, key: "partial")
            #expect(first.json?["failure"] == 1)
            let again = try await Self.send(client, body, key: "partial")
            #expect(again.body == first.body)
            #expect(again.replayed == "true")
        }
    }

    @Test("The same key with another request is 422, in the envelope of the API called")
    func mismatch() async throws {
        try await Self.withNews { client in
            _ = try await Self.send(client, #"{"to":"/topics/news","data":{"a":"1"}}"#, key: "k")
            let legacy = try await Self.send(client, #"{"to":"/topics/news","data":{"a":"2"}}"#, key: "k")
            #expect(legacy.status == .unprocessableContent)
            #expect(legacy.json?["error"]?.string?.contains("Idempotency-Key") == true)
            let uri = "/v1/projects/test-app/messages:send"
            let v1 = try await Self.send(client, uri, #"{"message":{"topic":"news"}}"#, key: "k")
            #expect(v1.status == .unprocessableContent)
            #expect(v1.json?["error"]?["code"] == 422)
            #expect(v1.json?["error"]?["status"] == "FAILED_PRECONDITION")
            #expect(try await Self.logged(client) == 1)
        }
    }

    @Test(
        "A key that is empty, too long, not printable ASCII or given twice is 400, and nothing is sent",
        arguments: ["", String(repeating: "k", count: 256), "clé", "tab\there"])
    func invalidKey(key: String) async throws {
        try await Self.withNews { client in
            let legacy = try await Self.send(client, #"{"to":"/topics/news"}"#, key: key)
            #expect(legacy.status == .badRequest)
            #expect(legacy.json?["error"]?.string?.contains("Idempotency-Key") == true)
            let v1 = try await Self.send(
                client, "/v1/projects/test-app/messages:send", #"{"message":{"topic":"news"}}"#, key: key)
            #expect(v1.status == .badRequest)
            #expect(v1.json?["error"]?["status"] == "INVALID_ARGUMENT")
            #expect(try await Self.logged(client) == 0)
        }
    }

    @Test("A header given twice is 400")
    func twice() async throws {
        try await Self.withNews { client in
            var headers: HTTPFields = [.authorization: "key=\(client.key)", .contentType: "application/json"]
            headers.append(HTTPField(name: HTTPField.Name("Idempotency-Key")!, value: "a"))
            headers.append(HTTPField(name: HTTPField.Name("Idempotency-Key")!, value: "b"))
            let status = try await client.client.execute(
                uri: "/fcm/send", method: .post, headers: headers, body: ByteBuffer(string: #"{"to":"/topics/news"}"#)
            ) { $0.status }
            #expect(status == .badRequest)
            #expect(try await Self.logged(client) == 0)
        }
    }

    @Test("Without the header every send is sent, and none is marked")
    func withoutKey() async throws {
        try await Self.withNews { client in
            let body = #"{"to":"/topics/news","data":{"a":"1"}}"#
            let first = try await Self.send(client, body, key: nil)
            let second = try await Self.send(client, body, key: nil)
            #expect(first.replayed == nil && second.replayed == nil)
            #expect(first.body != second.body)
            #expect(try await Self.logged(client) == 2)
        }
    }

    @Test("A request refused before a message is written, or a dry run, takes no key")
    func refusedTakesNoKey() async throws {
        try await Self.withNews { client in
            let uri = "/v1/projects/test-app/messages:send"
            let refused = try await Self.send(client, uri, #"{"message":{"topic":"bad topic"}}"#, key: "k")
            #expect(refused.status == .badRequest)
            let dry = try await Self.send(client, uri, #"{"validate_only":true,"message":{"topic":"news"}}"#, key: "k")
            #expect(dry.status == .ok)
            let sent = try await Self.send(client, uri, #"{"message":{"topic":"news"}}"#, key: "k")
            #expect(sent.status == .ok)
            #expect(sent.replayed == nil)
            #expect(try await Self.logged(client) == 1)
        }
    }

    @Test("A key belongs to its project: another project's same key is its own")
    func perProject() async throws {
        let fixture = try await Fixture.make()
        let (_, otherKey) = try await fixture.registry.createProject(projectId: "other-app", senderId: "999000999000")
        try await Self.withNews(fixture) { client in
            let body = #"{"to":"/topics/news","data":{"a":"1"}}"#
            _ = try await Self.send(client, body, key: "shared")
            let other = try await Self.send(client, body, key: "shared", auth: "key=\(otherKey)")
            #expect(other.status == .ok)
            #expect(other.replayed == nil)
            let otherLog = try await client.call(.get, "/api/messages", auth: "key=\(otherKey)")
            #expect(otherLog.json?["messages"]?.array?.count == 1)
        }
    }

    @Test("Servers on one database share the keys: concurrent repeats on two servers send once")
    func acrossServers() async throws {
        let first = try await Fixture.make()
        let store = try await TestBackend.reopen(try #require(first.registry.store as? any RegistryBackend))
        let second = try await RegistryService(store: store)
        try await second.startAudience()
        let app = buildApplication(
            registry: second, settings: HTTPSettings(), logger: Logger(label: "second"),
            sessions: XMPPHub(registry: second))
        try await Self.withNews(first) { one in
            try await app.test(.router) { other in
                let two = Fixture.Client(client: other, key: one.key)
                let body = #"{"to":"/topics/news","data":{"a":"1"}}"#
                let answers = try await withThrowingTaskGroup(of: Raw.self) { group in
                    for n in 0..<8 {
                        group.addTask { try await Self.send(n % 2 == 0 ? one : two, body, key: "shared") }
                    }
                    return try await group.reduce(into: []) { $0.append($1) }
                }
                // Each is the one answer, or (while it was being written) asked to come back.
                let bodies = Set(answers.filter { $0.status == .ok }.map(\.body))
                #expect(bodies.count == 1)
                #expect(answers.allSatisfy { $0.status == .ok || $0.status == .conflict })
                #expect(try await Self.logged(one) == 1)
            }
        }
    }

    @Test("A key is kept for the retention, then free again")
    func retention() async throws {
        var limits = Limits()
        limits.idempotencyRetention = .seconds(3)
        let registry = try await RegistryService(store: TestBackend.makeStore(), limits: limits)
        try await registry.startAudience()
        let (project, key) = try await registry.createProject(projectId: "test-app", senderId: "123456789012")
        try await Self.withNews(Fixture(registry: registry, project: project, key: key)) { client in
            let body = #"{"to":"/topics/news","data":{"a":"1"}}"#
            _ = try await Self.send(client, body, key: "short")
            #expect(try await Self.send(client, body, key: "short").replayed == "true")
            try await Task.sleep(for: .milliseconds(3200))
            let later = try await Self.send(client, body, key: "short")
            #expect(later.replayed == nil)
            #expect(try await Self.logged(client) == 2)
        }
    }
}

/// A keyed direct send through the relay, whose answer waits for FCM (an emulator registry).
@Suite("Idempotent sends through the relay", .onEveryBackend)
struct IdempotentRelayTests {
    @Test("While the first waits for FCM a repeat is 409 with Retry-After: 1; after it, the answer again; one delivery")
    func inProgressThenReplay() async throws {
        try await RelayHarness.run { harness in
            let device = token(1)
            try await harness.registerUpstream([device])
            // FCM is unavailable twice, a second each time: the first answer takes two seconds.
            try harness.fault(.unavailable, times: 2, retryAfter: 1, token: device)
            let body = #"{"to":"\#(device)","data":{"a":"b"}}"#
            let first = Task { try await IdempotencyTests.send(harness.client, body, key: "retry-me") }
            // The message and its key are written in one transaction: once it is logged, the key is taken.
            while try await harness.relay.loggedMessages(.all, in: harness.project, after: nil, limit: 1).items.isEmpty
            {
                try await Task.sleep(for: .milliseconds(20))
            }
            let during = try await IdempotencyTests.send(harness.client, body, key: "retry-me")
            #expect(during.status == .conflict)
            #expect(during.headers[.retryAfter] == "1")
            #expect(during.json?["error"]?.string?.contains("Idempotency-Key") == true)
            let answer = try await first.value
            #expect(answer.status == .ok)
            #expect(answer.json?["success"] == 1)
            let after = try await IdempotencyTests.send(harness.client, body, key: "retry-me")
            #expect(after.status == .ok)
            #expect(after.body == answer.body)
            #expect(after.replayed == "true")
            #expect(try await harness.deliveredTokens() == [device])
        }
    }

    @Test("A keyed send FCM refuses keeps FCM's refusal as its answer")
    func refusalKept() async throws {
        try await RelayHarness.run { harness in
            let dead = token(2)  // FCM never knew it
            let uri = "/v1/projects/relay-app/messages:send"
            let body = #"{"message":{"token":"\#(dead)"}}"#
            let first = try await IdempotencyTests.send(harness.client, uri, body, key: "dead")
            #expect(first.status == .notFound)
            let again = try await IdempotencyTests.send(harness.client, uri, body, key: "dead")
            #expect(again.status == .notFound)
            #expect(again.body == first.body)
            #expect(again.replayed == "true")
        }
    }
}
