import Foundation
import Hummingbird
import Registry
import TestBackends
import Testing

/// The native API's one model: a page token bound to its listing, camelCase bodies that still
/// read the deprecated snake_case spellings.
@Suite("Native API conventions", .onEveryBackend)
struct NativeConventionsTests {
    @Test("A page token is opaque and good only for the listing that issued it")
    func pageTokens() async throws {
        let fixture = try await Fixture.make()
        for n in 1...3 { _ = try await fixture.registry.subscribe([token(n)], to: "t\(n)", in: fixture.project) }
        _ = try await fixture.registry.createGroup(named: "g1", tokens: [token(1)], in: fixture.project)
        _ = try await fixture.registry.createGroup(named: "g2", tokens: [token(2)], in: fixture.project)
        try await fixture.test { client in
            let topics = try await client.call(.get, "/api/topics?pageSize=1")
            let topicToken = try #require(topics.json?["nextPageToken"]?.string)
            #expect(!topicToken.contains("t1"))  // opaque, not the name
            #expect(try await client.call(.get, "/api/topics?pageSize=1&pageToken=\(topicToken)").status == .ok)
            // Another listing's token, an edited one, or a raw name is refused.
            for (path, bad) in [
                ("/api/groups", topicToken), ("/api/topics", topicToken + "x"), ("/api/topics", "t1"),
                ("/api/messages", topicToken), ("/api/groups/g1", topicToken),
            ] {
                let reply = try await client.call(.get, "\(path)?pageToken=\(bad)")
                #expect(reply.status == .badRequest, "\(path) \(bad)")
                #expect(reply.json?["error"]?["code"] == "invalid_argument")
                #expect(reply.json?["error"]?["message"]?.string?.hasPrefix("pageToken is not one") == true)
            }
            let resolve = try await client.call(
                .post, "/api/audiences:resolve", body: #"{"topic":"t1","pageToken":"\#(topicToken)"}"#)
            #expect(resolve.status == .badRequest)
            for size in ["0", "-1", "x"] {
                #expect(try await client.call(.get, "/api/groups?pageSize=\(size)").status == .badRequest)
            }
        }
    }

    @Test("audiences:resolve takes notificationKey, and still the deprecated notification_key")
    func camelCase() async throws {
        let fixture = try await Fixture.make()
        let key = try await fixture.registry.createGroup(named: "g", tokens: [token(1), token(2)], in: fixture.project)
        try await fixture.test { client in
            for field in ["notificationKey", "notification_key"] {
                let reply = try await client.call(.post, "/api/audiences:resolve", body: #"{"\#(field)":"\#(key)"}"#)
                #expect(reply.status == .ok, "\(field)")
                #expect(reply.json?["count"] == 2)
            }
            let both = try await client.call(
                .post, "/api/audiences:resolve", body: #"{"notificationKey":"\#(key)","notification_key":"\#(key)"}"#)
            #expect(both.status == .badRequest)
        }
    }

    @Test("The message log pages with the same opaque tokens")
    func messageLogPages() async throws {
        let fixture = try await Fixture.make()
        _ = try await fixture.registry.subscribe([token(1)], to: "news", in: fixture.project)
        try await fixture.test { client in
            for _ in 1...3 {
                _ = try await client.call(.post, "/fcm/send", body: #"{"to":"/topics/news","data":{"a":"b"}}"#)
            }
            var seen = 0
            var next: String? = nil
            repeat {
                let page = try await client.call(.get, "/api/messages?pageSize=2" + (next.map { "&pageToken=\($0)" } ?? ""))
                #expect(page.status == .ok)
                seen += page.json?["messages"]?.array?.count ?? 0
                next = page.json?["nextPageToken"]?.string
            } while next != nil
            #expect(seen == 3)
        }
    }

    @Test("A malformed token is worded the same on every native route")
    func malformedToken() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            for (method, path) in [
                (HTTPRequest.Method.get, "/api/tokens/bad%20token"), (.get, "/api/tokens/bad%20token/messages"),
                (.put, "/api/tokens/bad%20token"),
            ] {
                let reply = try await client.call(method, path)
                #expect(reply.status == .badRequest, "\(path)")
                #expect(reply.json?["error"]?["message"] == "a token is 1 to 4096 characters of A-Z a-z 0-9 _ : . -")
            }
        }
    }
}
