import Foundation
import Hummingbird
import Registry
import TestBackends
import Testing

@Suite("Token attributes: what a token says of its device, and when it was last seen", .onEveryBackend)
struct TokenAttributesAPITests {
    static func daysAgo(_ days: Int) -> String {
        Date().addingTimeInterval(-Double(days) * 86_400).formatted(.iso8601)
    }

    static func secondsSince(_ json: JSON?) throws -> Double {
        let text = try #require(json?["lastSeenAt"]?.string)
        let date = try Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true))
        return Date().timeIntervalSince(date)
    }

    @Test("PUT sets attributes; a field left out keeps its value, null clears it; GET and the listing show them")
    func setKeepClear() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let set = try await client.call(
                .put, "/api/tokens/\(token(1))",
                body: #"{"platform":"ios","locale":"fr-CA","timeZone":"Europe/Paris","appVersion":"5.12.0"}"#)
            #expect(set.status == .ok)
            #expect(set.json?["platform"] == "ios")
            #expect(set.json?["locale"] == "fr-CA")
            #expect(set.json?["timeZone"] == "Europe/Paris")
            #expect(set.json?["appVersion"] == "5.12.0")
            #expect(set.json?["fresh"] == true)
            #expect(try Self.secondsSince(set.json) < 60)

            let partial = try await client.call(
                .put, "/api/tokens/\(token(1))", body: #"{"appVersion":"5.13","locale":null}"#)
            #expect(partial.json?["platform"] == "ios")
            #expect(partial.json?["timeZone"] == "Europe/Paris")
            #expect(partial.json?["appVersion"] == "5.13")
            #expect(partial.json?["locale"] == nil)

            let shown = try await client.call(.get, "/api/tokens/\(token(1))")
            #expect(shown.json?["platform"] == "ios")
            #expect(shown.json?["appVersion"] == "5.13")
            #expect(shown.json?["locale"] == nil)
            #expect(shown.json?["groups"] == [])

            // Android writes fr_CA: kept as the BCP 47 tag fr-CA.
            _ = try await client.call(
                .put, "/api/tokens/\(token(2))", body: #"{"platform":"android","locale":"fr_CA"}"#)
            let listed = try await client.call(.get, "/api/tokens")
            let tokens = try #require(listed.json?["tokens"]?.array)
            #expect(tokens.count == 2)
            let second = try #require(tokens.first { $0["token"] == .string(token(2)) })
            #expect(second["platform"] == "android")
            #expect(second["locale"] == "fr-CA")
            #expect(second["fresh"] == true)
            #expect(second["lastSeenAt"]?.string != nil)
        }
    }

    @Test(
        "A value a field does not take is 400 invalid_argument naming the field, and nothing changes",
        arguments: [
            (#"{"platform":"windows"}"#, "platform"), (#"{"platform":3}"#, "platform"),
            (#"{"locale":"f"}"#, "locale"), (#"{"locale":"fr-CA-toolongsubtag"}"#, "locale"),
            (#"{"locale":"fr CA"}"#, "locale"), (#"{"timeZone":"Mars/Olympus"}"#, "timeZone"),
            (#"{"timeZone":"Europe/Paris\n"}"#, "timeZone"), (#"{"appVersion":"5.x"}"#, "appVersion"),
            (#"{"appVersion":"1.2.3.4.5"}"#, "appVersion"), (#"{"appVersion":""}"#, "appVersion"),
            (#"{"lastSeenAt":"yesterday"}"#, "lastSeenAt"), (#"{"lastSeenAt":null}"#, "lastSeenAt"),
            (#"{"lastSeenAt":"2999-01-01T00:00:00Z"}"#, "lastSeenAt"),
            (#"{"platform":"web","appVersion":"x"}"#, "appVersion"),
        ])
    func refused(body: String, field: String) async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            _ = try await client.call(.put, "/api/tokens/\(token(1))", body: #"{"platform":"ios","appVersion":"1.0"}"#)
            let before = try await client.call(.get, "/api/tokens/\(token(1))")
            let refused = try await client.call(.put, "/api/tokens/\(token(1))", body: body)
            #expect(refused.status == .badRequest)
            #expect(refused.json?["error"]?["code"] == "invalid_argument")
            #expect(refused.json?["error"]?["message"]?.string?.hasPrefix(field) == true)
            let after = try await client.call(.get, "/api/tokens/\(token(1))")
            #expect(after.json == before.json)
            // A refused PUT of an unknown token registers nothing.
            let unknown = try await client.call(.put, "/api/tokens/\(token(9))", body: body)
            #expect(unknown.status == .badRequest)
            #expect(try await client.call(.get, "/api/tokens/\(token(9))").status == .notFound)
        }
    }

    @Test("lastSeenAt given by the app server is kept; past the 30 days of FCM's guidance the token is stale")
    func lastSeenGiven() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let old = try await client.call(
                .put, "/api/tokens/\(token(1))", body: #"{"lastSeenAt":"\#(Self.daysAgo(40))"}"#)
            #expect(old.status == .ok)
            #expect(old.json?["fresh"] == false)
            #expect(abs(try Self.secondsSince(old.json) - 40 * 86_400) < 60)
            let recent = try await client.call(
                .put, "/api/tokens/\(token(2))", body: #"{"lastSeenAt":"\#(Self.daysAgo(29))"}"#)
            #expect(recent.json?["fresh"] == true)
            // A PUT without lastSeenAt is the app checking in: now.
            let again = try await client.call(.put, "/api/tokens/\(token(1))")
            #expect(again.json?["fresh"] == true)
            #expect(try Self.secondsSince(again.json) < 60)
        }
    }

    @Test("Registration calls naming a token make it seen now; a send to it does not")
    func registrationCallsRefreshLastSeen() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            func makeStale(_ n: Int) async throws {
                let reply = try await client.call(
                    .put, "/api/tokens/\(token(n))", body: #"{"lastSeenAt":"\#(Self.daysAgo(100))"}"#)
                #expect(reply.json?["fresh"] == false)
            }
            func isFresh(_ n: Int) async throws -> JSON? {
                try await client.call(.get, "/api/tokens/\(token(n))").json?["fresh"]
            }
            for n in 1...6 { try await makeStale(n) }
            _ = try await client.call(
                .post, "/iid/v1:batchAdd", body: #"{"to":"/topics/news","registration_tokens":["\#(token(1))"]}"#)
            _ = try await client.call(.post, "/iid/v1/\(token(2))/rel/topics/sport")
            _ = try await client.createGroup("g", [token(3)])
            let key = try await client.createGroup("h", [token(6)])
            _ = try await client.groups(
                #"{"operation":"add","notification_key_name":"h","notification_key":"\#(key)","registration_ids":["\#(token(4))"]}"#
            )
            _ = try await client.call(.put, "/api/tokens/\(token(6))/topics", body: #"{"topics":["a"]}"#)
            // token(5) only receives a message.
            let sent = try await client.call(
                .post, "/fcm/send", body: #"{"to":"\#(token(5))","data":{"k":"v"}}"#)
            #expect(sent.status == .ok)
            #expect(try await isFresh(1) == true)
            #expect(try await isFresh(2) == true)
            #expect(try await isFresh(3) == true)
            #expect(try await isFresh(4) == true)
            #expect(try await isFresh(5) == false)
            #expect(try await isFresh(6) == true)
        }
    }

    @Test("tokens:batchUpdate: one result per token in order, a refused one beside the others, a token named twice")
    func batchUpdate() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let reply = try await client.call(
                .post, "/api/tokens:batchUpdate",
                body: """
                    {"tokens":[
                      {"token":"\(token(1))","platform":"android","timeZone":"America/Toronto"},
                      {"token":"\(token(2))","platform":"blackberry"},
                      {"token":"not a token","platform":"ios"},
                      {"token":"\(token(3))","lastSeenAt":"\(Self.daysAgo(45))","appVersion":"2"},
                      {"token":"\(token(1))","appVersion":"7.1"}
                    ]}
                    """)
            #expect(reply.status == .ok)
            let results = try #require(reply.json?["results"]?.array)
            #expect(results.count == 5)
            #expect(results[0]["token"] == .string(token(1)))
            #expect(results[0]["platform"] == "android")
            #expect(results[0]["appVersion"] == "7.1")
            #expect(results[1]["token"] == .string(token(2)))
            #expect(results[1]["error"]?["code"] == "invalid_argument")
            #expect(results[1]["error"]?["message"]?.string?.hasPrefix("platform") == true)
            #expect(results[2]["error"]?["code"] == "invalid_argument")
            #expect(results[3]["fresh"] == false)
            #expect(results[4]["timeZone"] == "America/Toronto")
            #expect(try await client.call(.get, "/api/tokens/\(token(2))").status == .notFound)
            let first = try await client.call(.get, "/api/tokens/\(token(1))")
            #expect(first.json?["platform"] == "android")
            #expect(first.json?["appVersion"] == "7.1")
        }
    }

    @Test("tokens:batchUpdate refuses no tokens, too many, and an entry without a token")
    func batchUpdateRefusals() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let none = try await client.call(.post, "/api/tokens:batchUpdate", body: #"{"tokens":[]}"#)
            #expect(none.status == .badRequest)
            let entries = (0...fixture.registry.limits.tokensPerBatch).map { #"{"token":"\#(token($0))"}"# }
            let many = try await client.call(
                .post, "/api/tokens:batchUpdate", body: #"{"tokens":[\#(entries.joined(separator: ","))]}"#)
            #expect(many.status == .badRequest)
            let bare = try await client.call(
                .post, "/api/tokens:batchUpdate", body: #"{"tokens":[{"token":"\#(token(1))"},{"platform":"ios"}]}"#)
            #expect(bare.status == .badRequest)
            #expect(bare.json?["error"]?["message"]?.string?.contains("tokens[1]") == true)
            // Nothing was written by the refused requests.
            #expect(try await client.call(.get, "/api/tokens/\(token(1))").status == .notFound)
        }
    }
}
