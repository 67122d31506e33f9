import Hummingbird
import TestBackends
import Testing

@Suite("Native API: audiences, conditions, listings, tokens", .onEveryBackend)
struct NativeAPITests {
    @Test("audiences:resolve for a condition: count, a page, the next page, per-topic counts")
    func resolveCondition() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            _ = try await client.call(
                .post, "/iid/v1:batchAdd",
                body: #"{"to":"/topics/a","registration_tokens":\#(jsonArray((1...5).map(token)))}"#)
            _ = try await client.call(
                .post, "/iid/v1:batchAdd",
                body: #"{"to":"/topics/b","registration_tokens":\#(jsonArray([token(1), token(6)]))}"#)
            _ = try await client.call(.put, "/api/tokens/\(token(7))")
            let body = #"{"condition":"'a' in topics && !('b' in topics)","pageSize":2}"#
            let first = try await client.call(.post, "/api/audiences:resolve", body: body)
            #expect(first.status == .ok)
            #expect(first.json?["count"] == 4)
            #expect(first.json?["tokens"] == [.string(token(2)), .string(token(3))])
            #expect(first.json?["topicCounts"] == ["a": 5, "b": 2])
            let next = try #require(first.json?["nextPageToken"]?.string)
            let second = try await client.call(
                .post, "/api/audiences:resolve",
                body: #"{"condition":"'a' in topics && !('b' in topics)","pageSize":2,"pageToken":"\#(next)"}"#)
            #expect(second.json?["tokens"] == [.string(token(4)), .string(token(5))])
            #expect(second.json?["nextPageToken"] == nil)
            // ! also reaches tokens with no topic at all.
            let negated = try await client.call(
                .post, "/api/audiences:resolve", body: #"{"condition":"!('a' in topics)","countOnly":true}"#)
            #expect(negated.json?["count"] == 2)
            #expect(negated.json?["tokens"] == nil)
        }
    }

    @Test("audiences:resolve refuses zero or two targets, and explains a bad condition with its position")
    func resolveErrors() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let none = try await client.call(.post, "/api/audiences:resolve", body: "{}")
            #expect(none.status == .badRequest)
            #expect(none.json?["error"]?["code"] == "invalid_argument")
            let two = try await client.call(.post, "/api/audiences:resolve", body: #"{"topic":"a","group":"g"}"#)
            #expect(two.status == .badRequest)
            let bad = try await client.call(.post, "/api/audiences:resolve", body: #"{"condition":"'a' topics"}"#)
            #expect(bad.status == .badRequest)
            #expect(bad.json?["error"]?["code"] == "invalid_condition")
            #expect(bad.json?["error"]?["diagnostic"]?["kind"] == "expectedInTopics")
            #expect(bad.json?["error"]?["diagnostic"]?["offset"] == 4)
            let group = try await client.call(.post, "/api/audiences:resolve", body: #"{"group":"missing"}"#)
            #expect(group.status == .badRequest)
        }
    }

    @Test("conditions:check answers the JSON form of condition check")
    func check() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let good = try await client.call(
                .post, "/api/conditions:check",
                body: #"{"condition":"'a' in topics || 'b' in topics && 'c' in topics","dialect":"v1"}"#)
            #expect(good.json?["valid"] == true)
            #expect(good.json?["canonical"] == "'a' in topics || ('b' in topics && 'c' in topics)")
            #expect(good.json?["diagnostics"]?.array?.first?["kind"] == "mixedOperators")
            let bad = try await client.call(
                .post, "/api/conditions:check", body: #"{"condition":"!('a' in topics)","dialect":"legacy"}"#)
            #expect(bad.json?["valid"] == false)
            #expect(bad.json?["diagnostics"]?.array?.first?["kind"] == "negationNotAllowed")
            #expect(bad.json?["diagnostics"]?.array?.first?["column"] == 1)
            let dialect = try await client.call(
                .post, "/api/conditions:check", body: #"{"condition":"'a' in topics","dialect":"v2"}"#)
            #expect(dialect.status == .badRequest)
        }
    }

    @Test("Listings of groups and topics, paged, and their details")
    func listings() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            for name in ["g1", "g2", "g3"] { _ = try await client.createGroup(name, [token(1), token(2)]) }
            _ = try await client.call(
                .post, "/iid/v1:batchAdd",
                body: #"{"to":"/topics/news","registration_tokens":\#(jsonArray((1...3).map(token)))}"#)
            let page = try await client.call(.get, "/api/groups?pageSize=2")
            #expect(page.json?["groups"]?.array?.compactMap { $0["name"]?.string } == ["g1", "g2"])
            let next = try #require(page.json?["nextPageToken"]?.string)
            let rest = try await client.call(.get, "/api/groups?pageSize=2&pageToken=\(next)")
            #expect(rest.json?["groups"]?.array?.compactMap { $0["name"]?.string } == ["g3"])
            let group = try await client.call(.get, "/api/groups/g2")
            #expect(group.json?["memberCount"] == 2)
            #expect(group.json?["members"]?.array?.compactMap { $0["token"]?.string } == [token(1), token(2)])
            let topics = try await client.call(.get, "/api/topics")
            #expect(topics.json?["topics"]?.array?.first?["subscriberCount"] == 3)
            let topic = try await client.call(.get, "/api/topics/news?pageSize=2")
            #expect(topic.json?["subscribers"]?.array?.count == 2)
            #expect(topic.json?["nextPageToken"] != nil)
            #expect(try await client.call(.get, "/api/groups/nope").status == .notFound)
        }
    }

    @Test("PUT topics sets a token's topics in one call; DELETE unregisters it everywhere")
    func tokenTopics() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            _ = try await client.call(.post, "/iid/v1/\(token(1))/rel/topics/old")
            _ = try await client.call(.post, "/iid/v1/\(token(1))/rel/topics/kept")
            let set = try await client.call(
                .put, "/api/tokens/\(token(1))/topics", body: #"{"topics":["kept","new","new"]}"#)
            #expect(set.json == ["added": ["new"], "removed": ["old"]])
            let shown = try await client.call(.get, "/api/tokens/\(token(1))")
            #expect(shown.json?["topics"]?.array?.compactMap { $0["name"]?.string } == ["kept", "new"])
            let bad = try await client.call(
                .put, "/api/tokens/\(token(1))/topics", body: #"{"topics":["ok","bad topic"]}"#)
            #expect(bad.status == .badRequest)
            _ = try await client.createGroup("solo", [token(1)])
            let deleted = try await client.call(.delete, "/api/tokens/\(token(1))")
            #expect(deleted.json?["state"] == "unregistered")
            #expect(deleted.json?["groups"] == [])
            #expect(deleted.json?["topics"] == [])
            let gone = try await client.call(.get, "/fcm/notification?notification_key_name=solo")
            #expect(gone.json == ["error": "notification_key not found"])
            let again = try await client.call(.put, "/api/tokens/\(token(1))")
            #expect(again.json?["state"] == "registered")
        }
    }
}
