import Hummingbird
import Registry
import TestBackends
import Testing

/// `PUT /api/topics/{topic}/fault`: subscription calls naming the topic are refused as FCM refuses
/// them when their rate to that topic is too high (`TOPICS_SUBSCRIPTION_RATE_EXCEEDED` in the
/// Admin SDKs, `RESOURCE_EXHAUSTED` on the wire), in each API family's answer, and change nothing.
@Suite("Topic faults", .onEveryBackend)
struct TopicFaultTests {
    static let fault = #"{"error":"TOPICS_SUBSCRIPTION_RATE_EXCEEDED","times":1,"retryAfter":"2s"}"#
    static let v1Base = "/v1/projects/test-app/registrations/\(token(1))/topicSubscriptions"

    private func fixture() async throws -> Fixture {
        let fixture = try await Fixture.make()
        for n in 1...3 { _ = try await fixture.registry.registerToken(token(n), in: fixture.project) }
        return fixture
    }

    private static func topics(of token: String, _ fixture: Fixture) async throws -> [String] {
        try await fixture.registry.allSubscriptions(ofToken: token, in: fixture.project)?.map(\.topic).sorted() ?? []
    }

    private static func batch(_ client: Fixture.Client, _ operation: String, _ topic: String, _ tokens: [Int])
        async throws -> Reply
    {
        try await client.call(
            .post, "/iid/v1:\(operation)",
            body: #"{"to":"/topics/\#(topic)","registration_tokens":\#(jsonArray(tokens.map(token)))}"#)
    }

    @Test(
        "batchAdd: every token's result is RESOURCE_EXHAUSTED and nobody is subscribed; other topics are not affected")
    func batchAdd() async throws {
        let fixture = try await fixture()
        try await fixture.test { client in
            let set = try await client.call(.put, "/api/topics/news/fault", body: Self.fault)
            #expect(set.status == .ok)
            #expect(set.json == ["error": "TOPICS_SUBSCRIPTION_RATE_EXCEEDED", "times": 1, "retryAfter": "2s"])
            let other = try await Self.batch(client, "batchAdd", "sports", [1])
            #expect(other.json == ["results": [[:]]])
            let refused = try await Self.batch(client, "batchAdd", "news", [1, 2, 3])
            #expect(refused.status == .ok)
            #expect(
                refused.json == [
                    "results": [
                        ["error": "RESOURCE_EXHAUSTED"], ["error": "RESOURCE_EXHAUSTED"],
                        ["error": "RESOURCE_EXHAUSTED"],
                    ]
                ])
            for n in 1...3 { #expect(try await Self.topics(of: token(n), fixture) == (n == 1 ? ["sports"] : [])) }
            // times: 1 — the call after goes through.
            #expect(try await Self.batch(client, "batchAdd", "news", [1, 2]).json == ["results": [[:], [:]]])
            #expect(try await Self.topics(of: token(2), fixture) == ["news"])
        }
    }

    @Test("batchRemove is refused the same way and every subscription stays")
    func batchRemove() async throws {
        let fixture = try await fixture()
        try await fixture.test { client in
            _ = try await Self.batch(client, "batchAdd", "news", [1, 2])
            _ = try await client.call(
                .put, "/api/topics/news/fault", body: #"{"error":"TOPICS_SUBSCRIPTION_RATE_EXCEEDED"}"#)
            for _ in 1...2 {
                let refused = try await Self.batch(client, "batchRemove", "news", [1, 2])
                #expect(
                    refused.json == ["results": [["error": "RESOURCE_EXHAUSTED"], ["error": "RESOURCE_EXHAUSTED"]]])
            }
            #expect(try await Self.topics(of: token(1), fixture) == ["news"])
            #expect(try await client.call(.delete, "/api/topics/news/fault").status == .ok)
            #expect(try await client.call(.delete, "/api/topics/news/fault").status == .notFound)
            #expect(try await Self.batch(client, "batchRemove", "news", [1, 2]).json == ["results": [[:], [:]]])
            #expect(try await Self.topics(of: token(1), fixture) == [])
        }
    }

    @Test("rel/topics: 429 {\"error\":\"RESOURCE_EXHAUSTED\"} with Retry-After, and no subscription")
    func relTopics() async throws {
        let fixture = try await fixture()
        try await fixture.test { client in
            _ = try await client.call(.put, "/api/topics/news/fault", body: Self.fault)
            let refused = try await client.call(.post, "/iid/v1/\(token(1))/rel/topics/news")
            #expect(refused.status == .tooManyRequests)
            #expect(refused.json == ["error": "RESOURCE_EXHAUSTED"])
            #expect(refused.headers[.retryAfter] == "2")
            #expect(try await Self.topics(of: token(1), fixture) == [])
            #expect(try await client.call(.post, "/iid/v1/\(token(1))/rel/topics/news").status == .ok)
            #expect(try await Self.topics(of: token(1), fixture) == ["news"])
        }
    }

    @Test("v1 topicSubscriptions: create and delete are 429 RESOURCE_EXHAUSTED without an FcmError; reads still answer")
    func v1() async throws {
        let fixture = try await fixture()
        try await fixture.test { client in
            _ = try await client.call(.post, Self.v1Base + "?topic_name=news", body: "{}")
            _ = try await client.call(
                .put, "/api/topics/news/fault", body: #"{"error":"TOPICS_SUBSCRIPTION_RATE_EXCEEDED","times":2}"#)
            let deleted = try await client.call(.delete, Self.v1Base + "/news")
            #expect(deleted.status == .tooManyRequests)
            #expect(deleted.json?["error"]?["status"] == "RESOURCE_EXHAUSTED")
            #expect(deleted.json?["error"]?["code"] == 429)
            #expect(deleted.json?["error"]?["details"] == nil)
            #expect(deleted.headers[.retryAfter] == nil)
            #expect(try await client.call(.get, Self.v1Base + "/news").status == .ok)
            let created = try await client.call(
                .post, "/v1/projects/test-app/registrations/\(token(2))/topicSubscriptions?topic_name=news", body: "{}")
            #expect(created.status == .tooManyRequests)
            #expect(try await Self.topics(of: token(1), fixture) == ["news"])
            #expect(try await Self.topics(of: token(2), fixture) == [])
            // Two calls refused: the fault is spent.
            #expect(try await client.call(.delete, Self.v1Base + "/news").status == .ok)
            #expect(try await Self.topics(of: token(1), fixture) == [])
        }
    }

    @Test(
        "Bad topic fault requests are refused and set nothing",
        arguments: [
            #"{"error":"QUOTA_EXCEEDED"}"#, #"{}"#, #"{"error":"TOPICS_SUBSCRIPTION_RATE_EXCEEDED","times":0}"#,
            #"{"error":"TOPICS_SUBSCRIPTION_RATE_EXCEEDED","retryAfter":"2"}"#,
        ])
    func badRequests(body: String) async throws {
        let fixture = try await fixture()
        try await fixture.test { client in
            let reply = try await client.call(.put, "/api/topics/news/fault", body: body)
            #expect(reply.status == .badRequest)
            #expect(reply.json?["error"]?["code"] == "invalid_argument")
            #expect(
                try await client.call(.put, "/api/topics/bad%20topic/fault", body: Self.fault).status == .badRequest)
            #expect(try await Self.batch(client, "batchAdd", "news", [1]).json == ["results": [[:]]])
        }
    }
}
