import Hummingbird
import TestBackends
import Testing

@Suite("v1 topicSubscriptions API", .onEveryBackend)
struct TopicSubscriptionAPITests {
    let base = "/v1/projects/test-app/registrations/\(token(1))/topicSubscriptions"

    @Test("create returns the TopicSubscription; again is 409 ALREADY_EXISTS in Google's envelope")
    func create() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let reply = try await client.call(
                .post, base + "?topic_name=weather", body: "{}", auth: .some("Bearer \(fixture.key)"))
            #expect(reply.status == .ok)
            #expect(
                reply.json?["name"] == .string("projects/test-app/registrations/\(token(1))/topicSubscriptions/weather")
            )
            #expect(reply.json?["topic_name"] == "weather")
            let time = try #require(reply.json?["create_time"]?.string)
            #expect(time.wholeMatch(of: /\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z/) != nil)
            let again = try await client.call(.post, base + "?topic_name=weather", body: "{}")
            #expect(again.status == .conflict)
            #expect(
                again.json == [
                    "error": ["code": 409, "message": "Requested entity already exists", "status": "ALREADY_EXISTS"]
                ])
        }
    }

    @Test("get, and list with pageSize and an opaque pageToken")
    func getAndList() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            for topic in ["c", "a", "b"] {
                _ = try await client.call(.post, base + "?topicName=\(topic)", body: "{}")
            }
            let one = try await client.call(.get, base + "/b")
            #expect(one.json?["topic_name"] == "b")
            let first = try await client.call(.get, base + "?pageSize=2")
            #expect(first.json?["topic_subscriptions"]?.array?.compactMap { $0["topic_name"]?.string } == ["a", "b"])
            let next = try #require(first.json?["next_page_token"]?.string)
            let second = try await client.call(.get, base + "?pageSize=2&pageToken=\(next)")
            #expect(second.json?["topic_subscriptions"]?.array?.compactMap { $0["topic_name"]?.string } == ["c"])
            #expect(second.json?["next_page_token"] == nil)
            let all = try await client.call(.get, base + "?pageSize=5000")
            #expect(all.json?["topic_subscriptions"]?.array?.count == 3)
            let badSize = try await client.call(.get, base + "?pageSize=lots")
            #expect(badSize.status == .badRequest)
            #expect(badSize.json?["error"]?["status"] == "INVALID_ARGUMENT")
            let missing = try await client.call(.get, base + "/zzz")
            #expect(missing.status == .notFound)
            #expect(missing.json?["error"]?["status"] == "NOT_FOUND")
        }
    }

    @Test("delete: 404 NOT_FOUND unless allow_missing or allowMissing")
    func delete() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            _ = try await client.call(.post, base + "?topic_name=a", body: "{}")
            let deleted = try await client.call(.delete, base + "/a")
            #expect(deleted.status == .ok)
            #expect(deleted.json == [:])
            let missing = try await client.call(.delete, base + "/a")
            #expect(missing.status == .notFound)
            #expect(missing.json?["error"]?["code"] == 404)
            #expect(try await client.call(.delete, base + "/a?allow_missing=true").status == .ok)
            #expect(try await client.call(.delete, base + "/a?allowMissing=true").status == .ok)
        }
    }

    @Test("A {p} of another project is 403 PERMISSION_DENIED; the sender id also names the project")
    func otherProject() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let reply = try await client.call(
                .get, "/v1/projects/someone-else/registrations/\(token(1))/topicSubscriptions")
            #expect(reply.status == .forbidden)
            #expect(reply.json?["error"]?["status"] == "PERMISSION_DENIED")
            let byNumber = try await client.call(
                .post, "/v1/projects/123456789012/registrations/\(token(1))/topicSubscriptions?topic_name=a", body: "{}"
            )
            #expect(byNumber.status == .ok)
        }
    }

    @Test("Bad topic names and tokens are INVALID_ARGUMENT with a field violation")
    func invalidArguments() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let topic = try await client.call(.post, base + "?topic_name=bad%20topic", body: "{}")
            #expect(topic.status == .badRequest)
            #expect(topic.json?["error"]?["status"] == "INVALID_ARGUMENT")
            let violation = topic.json?["error"]?["details"]?.array?.first?["fieldViolations"]?.array?.first
            #expect(violation?["field"] == "topic_name")
            let noTopic = try await client.call(.post, base, body: "{}")
            #expect(noTopic.status == .badRequest)
            let badToken = try await client.call(
                .post, "/v1/projects/test-app/registrations/bad%20token/topicSubscriptions?topic_name=a", body: "{}")
            #expect(badToken.status == .badRequest)
        }
    }
}

@Suite("v1 topicSubscriptions PATCH", .onEveryBackend)
struct TopicSubscriptionPatchTests {
    @Test("PATCH answers the subscription; a missing one is 404, or created with allowMissing / allow_missing")
    func patch() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let path = "/v1/projects/test-app/registrations/\(token(1))/topicSubscriptions/news"
            let missing = try await client.call(.patch, path, body: "{}")
            #expect(missing.status == .notFound)
            let created = try await client.call(.patch, path + "?allowMissing=true", body: #"{"topic_name":"news"}"#)
            #expect(created.status == .ok)
            #expect(created.json?["topic_name"] == "news")
            let again = try await client.call(.patch, path + "?allow_missing=true", body: "{}")
            #expect(again.json?["create_time"] == created.json?["create_time"])
            let plain = try await client.call(.patch, path, body: "{}")
            #expect(plain.status == .ok)
        }
    }
}
