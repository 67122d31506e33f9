import Foundation
import Hummingbird
import Registry
import TestBackends
import Testing

@Suite("Audiences narrowed by what tokens say: where on POST /api/audiences:resolve", .onEveryBackend)
struct AudienceWhereAPITests {
    /// Ten tokens on `news`, the first five also on `sports`, each saying something else of its device.
    static func seed(_ client: Fixture.Client) async throws {
        let fortyDaysAgo = Date().addingTimeInterval(-40 * 86_400).formatted(.iso8601)
        let said = [
            #""platform":"ios","locale":"fr-CA","timeZone":"Europe/Paris","appVersion":"5.12.0""#,
            #""platform":"ios","locale":"fr","timeZone":"Europe/Paris","appVersion":"5.0""#,
            #""platform":"android","locale":"fr-FR","timeZone":"Europe/Paris","appVersion":"5.99.1""#,
            #""platform":"ios","locale":"frr","timeZone":"Europe/Paris","appVersion":"5.1""#,
            #""platform":"ios","locale":"en-GB","timeZone":"Europe/London","appVersion":"5.2""#,
            #""platform":"ios","timeZone":"Europe/Paris","appVersion":"5.3""#,
            #""platform":"web","locale":"fr-CA","timeZone":"America/Toronto","appVersion":"4.9""#,
            #""platform":"ios","locale":"fr-CA","timeZone":"Europe/Paris","appVersion":"6.0""#,
            #""locale":"fr""#,
            #""platform":"ios","locale":"FR-ca","timeZone":"Europe/Paris","appVersion":"5.5","lastSeenAt":"\#(fortyDaysAgo)""#,
        ]
        let entries = said.enumerated().map { #"{"token":"\#(token($0.offset + 1))",\#($0.element)}"# }
        let update = try await client.call(
            .post, "/api/tokens:batchUpdate", body: #"{"tokens":[\#(entries.joined(separator: ","))]}"#)
        #expect(update.status == .ok)
        #expect(update.json?["results"]?.array?.allSatisfy { $0["error"] == nil } == true)
        let news = jsonArray((1...10).map(token))
        let sports = jsonArray((1...5).map(token))
        _ = try await client.call(.post, "/iid/v1:batchAdd", body: #"{"to":"/topics/news","registration_tokens":\#(news)}"#)
        _ = try await client.call(
            .post, "/iid/v1:batchAdd", body: #"{"to":"/topics/sports","registration_tokens":\#(sports)}"#)
        // The batchAdd saw every token now: the tenth is told again when it was last seen.
        let old = try await client.call(.put, "/api/tokens/\(token(10))", body: #"{"lastSeenAt":"\#(fortyDaysAgo)"}"#)
        #expect(old.json?["fresh"] == false)
    }

    static func resolve(_ client: Fixture.Client, _ body: String) async throws -> Reply {
        try await client.call(.post, "/api/audiences:resolve", body: body)
    }

    /// iOS, French of any region (never `frr`), versions 5.0.0 to 5.99: tokens 1, 2 and 10.
    static let iosFrench5 = #"{"platform":["ios"],"locale":["fr"],"appVersion":{"min":"5.0.0","max":"5.99"}}"#

    @Test("count, pages and topicCounts honour where; within a key values are alternatives, keys combine with and")
    func narrowsConditionsAndTopics() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            try await Self.seed(client)
            let topic = try await Self.resolve(client, #"{"topic":"news","countOnly":true,"where":\#(Self.iosFrench5)}"#)
            #expect(topic.status == .ok)
            #expect(topic.json?["count"] == 3)
            #expect(topic.json?["topicCounts"]?["news"] == 3)

            let condition = try await Self.resolve(
                client, #"{"condition":"'news' in topics && 'sports' in topics","where":\#(Self.iosFrench5)}"#)
            #expect(condition.json?["count"] == 2)
            #expect(condition.json?["tokens"] == .array([.string(token(1)), .string(token(2))]))
            #expect(condition.json?["topicCounts"]?["news"] == 3)
            #expect(condition.json?["topicCounts"]?["sports"] == 2)

            // Without where, the same condition reaches all five.
            let all = try await Self.resolve(client, #"{"condition":"'news' in topics && 'sports' in topics"}"#)
            #expect(all.json?["count"] == 5)
            #expect(all.json?["topicCounts"]?["news"] == 10)

            // Pages of two, within the filter.
            let first = try await Self.resolve(client, #"{"topic":"news","pageSize":2,"where":\#(Self.iosFrench5)}"#)
            let next = try #require(first.json?["nextPageToken"]?.string)
            let second = try await Self.resolve(
                client, #"{"topic":"news","pageSize":2,"pageToken":"\#(next)","where":\#(Self.iosFrench5)}"#)
            #expect(second.json?["nextPageToken"] == nil)
            // Pages follow the tokens' ids, given in the order the batch registered them.
            let listed = [first, second].flatMap { $0.json?["tokens"]?.array ?? [] }.compactMap(\.string)
            #expect(first.json?["tokens"]?.array?.count == 2)
            #expect(listed.count == 3)
            #expect(Set(listed) == [token(1), token(2), token(10)])

            // Seen within 30 days leaves out the tenth, last seen forty days ago: 1, 2 and 8 are left.
            let seen = try await Self.resolve(
                client,
                #"{"topic":"news","countOnly":true,"where":{"platform":["ios"],"locale":["fr"],"seenWithin":"2592000s"}}"#)
            #expect(seen.json?["count"] == 3)
            // Alternatives within a key; a token that says no locale never matches a locale filter.
            let zones = try await Self.resolve(
                client, #"{"topic":"news","countOnly":true,"where":{"timeZone":["Europe/London","America/Toronto"]}}"#)
            #expect(zones.json?["count"] == 2)
            let locales = try await Self.resolve(
                client, #"{"topic":"news","countOnly":true,"where":{"locale":["fr-ca","en"]}}"#)
            #expect(locales.json?["count"] == 5)
            let android = try await Self.resolve(
                client, #"{"condition":"!('sports' in topics)","countOnly":true,"where":{"platform":["android","web"]}}"#)
            #expect(android.json?["count"] == 1)
            let versions = try await Self.resolve(
                client, #"{"topic":"news","countOnly":true,"where":{"appVersion":{"min":"5.99"}}}"#)
            #expect(versions.json?["count"] == 2)
        }
    }

    @Test("where narrows a device group, a notification key and a token too")
    func narrowsGroupsAndTokens() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            try await Self.seed(client)
            let key = try await client.createGroup("family", [token(1), token(3), token(5), token(9)])
            let group = try await Self.resolve(client, #"{"group":"family","where":{"platform":["ios"]}}"#)
            #expect(group.json?["count"] == 2)
            #expect(group.json?["tokens"] == .array([.string(token(1)), .string(token(5))]))
            let byKey = try await Self.resolve(
                client, #"{"notificationKey":"\#(key)","countOnly":true,"where":{"locale":["fr"]}}"#)
            #expect(byKey.json?["count"] == 3)
            let one = try await Self.resolve(client, #"{"token":"\#(token(3))","where":{"platform":["ios"]}}"#)
            #expect(one.json?["count"] == 0)
            #expect(one.json?["tokens"] == .array([]))
        }
    }

    @Test("the index loaded from the tables answers where as the writes left it")
    func reloadAgrees() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            try await Self.seed(client)
            // A token changes what it says, and another leaves.
            _ = try await client.call(.put, "/api/tokens/\(token(2))", body: #"{"platform":"android"}"#)
            _ = try await client.call(.delete, "/api/tokens/\(token(1))")
            let body = #"{"topic":"news","countOnly":true,"where":\#(Self.iosFrench5)}"#
            #expect(try await Self.resolve(client, body).json?["count"] == 1)
            try await fixture.registry.reloadAudience()
            #expect(try await Self.resolve(client, body).json?["count"] == 1)
        }
    }

    @Test(
        "a where no token could match is 400 invalid_argument naming the key, in the native envelope",
        // Every refusal the codec words is in AudienceWhereCodecTests; here, one of each kind on the wire.
        arguments: [
            (#"[]"#, "where must"), (#"{"locale":["f"]}"#, "where.locale"),
            (#"{"appVersion":{"min":"6","max":"5.9"}}"#, "where.appVersion"), (#"{"seenWithin":"30d"}"#, "where.seenWithin"),
        ])
    func refused(filter: String, words: String) async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let reply = try await Self.resolve(client, #"{"topic":"news","where":\#(filter)}"#)
            #expect(reply.status == .badRequest)
            #expect(reply.json?["error"]?["code"] == "invalid_argument")
            #expect(reply.json?["error"]?["message"]?.string?.hasPrefix(words) == true, "\(reply.json as Any)")
        }
    }
}
