import Foundation
import Hummingbird
import Registry
import TestBackends
import Testing

@Suite("sendToStale false: fan-outs leave stale tokens out and the message says how many", .onEveryBackend)
struct StaleSkippingAPITests {
    /// Four tokens on `news`, in the group `family` with the first; the fourth last seen 40 days ago.
    /// - Returns: the group's notification key.
    @discardableResult
    static func seed(_ client: Fixture.Client) async throws -> String {
        let news = jsonArray((1...4).map(token))
        _ = try await client.call(
            .post, "/iid/v1:batchAdd", body: #"{"to":"/topics/news","registration_tokens":\#(news)}"#)
        let key = try await client.createGroup("family", [token(1), token(4)])
        let fortyDaysAgo = Date().addingTimeInterval(-40 * 86_400).formatted(.iso8601)
        let old = try await client.call(.put, "/api/tokens/\(token(4))", body: #"{"lastSeenAt":"\#(fortyDaysAgo)"}"#)
        #expect(old.json?["fresh"] == false)
        return key
    }

    /// The newest logged message, as `GET /api/messages/{id}` shows it.
    static func lastMessage(_ client: Fixture.Client) async throws -> JSON {
        let listed = try #require(
            try await client.call(.get, "/api/messages?pageSize=1").json?["messages"]?.array?.first)
        let id = try #require(listed["id"]?.string)
        let path = try #require(id.addingPercentEncoding(withAllowedCharacters: .alphanumerics))
        return try #require(try await client.call(.get, "/api/messages/\(path)").json)
    }

    @Test("a topic, a condition and a device group skip the stale token; a send to it by name still goes")
    func skipsStale() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let key = try await Self.seed(client)
            let policy = try await client.call(.patch, "/api/project", body: #"{"tokenPolicy":{"sendToStale":false}}"#)
            #expect(policy.status == .ok)

            _ = try await client.call(.post, "/fcm/send", body: #"{"to":"/topics/news","data":{"k":"v"}}"#)
            let topic = try await Self.lastMessage(client)
            #expect(topic["recipientCount"] == 3)
            #expect(topic["skippedStale"] == 1)

            _ = try await client.call(
                .post, "/fcm/send", body: #"{"condition":"'news' in topics || 'sports' in topics","data":{"k":"v"}}"#)
            let condition = try await Self.lastMessage(client)
            #expect(condition["recipientCount"] == 3)
            #expect(condition["skippedStale"] == 1)

            let group = try await client.call(.post, "/fcm/send", body: #"{"to":"\#(key)","data":{"k":"v"}}"#)
            #expect(group.json?["success"] == 1)
            let logged = try await Self.lastMessage(client)
            #expect(logged["recipientCount"] == 1)
            #expect(logged["skippedStale"] == 1)

            let named = try await client.call(.post, "/fcm/send", body: #"{"to":"\#(token(4))","data":{"k":"v"}}"#)
            #expect(named.json?["success"] == 1)
            let direct = try await Self.lastMessage(client)
            #expect(direct["recipientCount"] == 1)
            #expect(direct["skippedStale"] == 0)
        }
    }

    @Test("with the default policy every token is sent to and nothing is skipped")
    func sendsToStaleByDefault() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            try await Self.seed(client)
            _ = try await client.call(.post, "/fcm/send", body: #"{"to":"/topics/news","data":{"k":"v"}}"#)
            let topic = try await Self.lastMessage(client)
            #expect(topic["recipientCount"] == 4)
            #expect(topic["skippedStale"] == 0)
        }
    }
}
