import Foundation
import Hummingbird
import HummingbirdTesting
import TestBackends
import Testing

/// Messages in each protocol's words: legacy HTTP (tables 1–9), HTTP v1, XMPP (table 4).
@Suite("Messages", .onEveryBackend)
struct MessageAPITests {
    /// A fixture with tokens 1–3 subscribed to "news", token 9 reported dead, and a group "g" of tokens 1 and 2.
    static func withMessaging(_ body: @escaping @Sendable (Fixture.Client, String) async throws -> Void) async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            _ = try await client.call(
                .post, "/iid/v1:batchAdd",
                body: #"{"to":"/topics/news","registration_tokens":\#(jsonArray((1...3).map(token)))}"#)
            _ = try await client.call(.put, "/api/tokens/\(token(9))")
            _ = try await client.call(.delete, "/api/tokens/\(token(9))")
            let key = try await client.createGroup("g", [token(1), token(2)])
            try await body(client, key)
        }
    }

    static func send(_ client: Fixture.Client, _ json: String) async throws -> Reply {
        try await client.call(.post, "/fcm/send", body: json)
    }

    // MARK: - Legacy HTTP, JSON

    @Test("Multicast: one result per token in order, success and failure counted")
    func multicast() async throws {
        try await Self.withMessaging { client, _ in
            let reply = try await Self.send(
                client, #"{"registration_ids":["\#(token(1))","not a token","\#(token(9))"],"data":{"score":"5x1"}}"#)
            #expect(reply.status == .ok)
            #expect(reply.json?["success"] == 1)
            #expect(reply.json?["failure"] == 2)
            #expect(reply.json?["canonical_ids"] == 0)
            if case .number = reply.json?["multicast_id"] {} else { Issue.record("multicast_id is not a number") }
            let results = try #require(reply.json?["results"]?.array)
            #expect(results[0]["message_id"]?.string?.hasPrefix("0:") == true)
            #expect(results[1] == ["error": "InvalidRegistration"])
            #expect(results[2] == ["error": "NotRegistered"])
        }
    }

    @Test(arguments: [
        (#"{"data":{"a":"b"}}"#, "MissingRegistration"),
        (#"{"registration_ids":[],"data":{"a":"b"}}"#, "MissingRegistration"),
        (#"{"to":"TOKEN","time_to_live":2419201}"#, "InvalidTtl"),
        (#"{"to":"TOKEN","time_to_live":-1}"#, "InvalidTtl"),
        (#"{"to":"TOKEN","time_to_live":1.5}"#, "InvalidTtl"),
        (#"{"to":"TOKEN","data":{"from":"x"}}"#, "InvalidDataKey"),
        (#"{"to":"TOKEN","data":{"message_type":"x"}}"#, "InvalidDataKey"),
        (#"{"to":"TOKEN","data":{"google.sent_time":"x"}}"#, "InvalidDataKey"),
        (#"{"to":"TOKEN","data":{"gcm.notification":"x"}}"#, "InvalidDataKey"),
        (#"{"to":"TOKEN","data":{"big":"BIG4097"}}"#, "MessageTooBig"),
    ])
    func resultErrors(body: String, error: String) async throws {
        let json = body.replacingOccurrences(of: "TOKEN", with: token(1))
            .replacingOccurrences(of: "BIG4097", with: String(repeating: "x", count: 4097 - 3))
        try await Self.withMessaging { client, _ in
            let reply = try await Self.send(client, json)
            #expect(reply.status == .ok)
            #expect(reply.json?["results"] == [["error": .string(error)]])
            #expect(reply.json?["success"] == 0)
        }
    }

    @Test("Payload limits: 4096 bytes to tokens, 2048 to topics, keys and values counted")
    func sizes() async throws {
        try await Self.withMessaging { client, _ in
            let fits = try await Self.send(
                client, #"{"to":"\#(token(1))","data":{"k":"\#(String(repeating: "x", count: 4095))"}}"#)
            #expect(fits.json?["success"] == 1)
            let topicFits = try await Self.send(
                client, #"{"to":"/topics/news","data":{"k":"\#(String(repeating: "x", count: 2047))"}}"#)
            if case .number = topicFits.json?["message_id"] {} else { Issue.record("expected a message_id") }
            let topicTooBig = try await Self.send(
                client, #"{"to":"/topics/news","data":{"k":"\#(String(repeating: "x", count: 2048))"}}"#)
            #expect(topicTooBig.json == ["error": "MessageTooBig"])
        }
    }

    @Test("Topics, conditions and device groups answer in their own shapes")
    func targets() async throws {
        try await Self.withMessaging { client, key in
            let condition = try await Self.send(
                client, #"{"condition":"'news' in topics && ('a' in topics || 'b' in topics)","data":{"a":"b"}}"#)
            if case .number = condition.json?["message_id"] {} else { Issue.record("expected a message_id") }
            // The answer's number is the logged entry's id.
            let raw = try await client.client.execute(
                uri: "/fcm/send", method: .post,
                headers: [.authorization: "key=\(client.key)", .contentType: "application/json"],
                body: ByteBuffer(string: #"{"to":"/topics/news","data":{"a":"b"}}"#)
            ) { String(buffer: $0.body) }
            let number = try #require(raw.split(separator: ":").last?.dropLast())
            #expect(Int64(number).map { $0 < 1 << 53 } == true)
            let logged = try await client.call(.get, "/api/messages?pageSize=1")
            #expect(logged.json?["messages"]?.array?.first?["id"]?.string == String(number))
            let group = try await Self.send(client, #"{"to":"\#(key)","data":{"a":"b"}}"#)
            #expect(group.json == ["success": 2, "failure": 0])
            let deprecated = try await Self.send(client, #"{"notification_key":"\#(key)","data":{"a":"b"}}"#)
            #expect(deprecated.json == ["success": 2, "failure": 0])
        }
    }

    @Test(arguments: [
        (#"{"to":"/topics/news","#, "the request body is not valid JSON"),
        (#"{"to":"TOKEN","time_to_live":"soon"}"#, "InvalidParameters: time_to_live must be a number of seconds"),
        (
            #"{"to":"TOKEN","registration_ids":["TOKEN"]}"#,
            "InvalidParameters: give only one of to, registration_ids, condition, notification_key"
        ),
        (#"{"to":"TOKEN","priority":"urgent"}"#, #"InvalidParameters: priority must be "normal" or "high""#),
        (#"{"to":"TOKEN","data":"x"}"#, "InvalidParameters: data must be a JSON object"),
        (#"{"to":"TOKEN","notification":{"title":5}}"#, "InvalidParameters: notification.title must be a string"),
        (#"{"to":"/topics/bad topic"}"#, "InvalidParameters: topic name must match [a-zA-Z0-9-_.~%]{1,900}"),
        (#"{"to":"TOKEN","dry_run":"yes"}"#, "InvalidParameters: dry_run must be true or false"),
    ])
    func badRequests(body: String, error: String) async throws {
        try await Self.withMessaging { client, _ in
            let reply = try await Self.send(client, body.replacingOccurrences(of: "TOKEN", with: token(1)))
            #expect(reply.status == .badRequest)
            #expect(reply.json == ["error": .string(error)])
        }
    }

    @Test("Conditions use the legacy dialect: at most two operators, no '!'")
    func legacyConditions() async throws {
        try await Self.withMessaging { client, _ in
            let three = try await Self.send(
                client, #"{"condition":"'a' in topics && 'b' in topics && 'c' in topics && 'd' in topics"}"#)
            #expect(three.status == .badRequest)
            #expect(three.json?["error"]?.string?.contains("at most 2 operators") == true)
            let negation = try await Self.send(client, #"{"condition":"!('a' in topics)"}"#)
            #expect(negation.status == .badRequest)
            #expect(
                negation.json?["error"]?.string?.hasPrefix("InvalidParameters: Invalid condition expression provided.")
                    == true)
        }
    }

    @Test("More than 1000 registration_ids is a 400")
    func tooManyRecipients() async throws {
        try await Self.withMessaging { client, _ in
            let reply = try await Self.send(client, #"{"registration_ids":\#(jsonArray((0...1000).map(token)))}"#)
            #expect(reply.status == .badRequest)
        }
    }

    @Test("dry_run validates and answers fake ids without recording; real sends are recorded with their recipients")
    func dryRunAndLog() async throws {
        try await Self.withMessaging { client, _ in
            _ = try await client.call(.put, "/api/tokens/\(token(5))")
            let dry = try await Self.send(client, #"{"to":"\#(token(5))","dry_run":true,"data":{"a":"b"}}"#)
            #expect(dry.json?["results"] == [["message_id": "fake_message_id"]])
            _ = try await Self.send(client, #"{"to":"/topics/news","data":{"n":"1"}}"#)
            _ = try await Self.send(client, #"{"to":"\#(token(5))","data":{"n":"2"}}"#)
            let all = try await client.call(.get, "/api/messages")
            #expect(all.json?["messages"]?.array?.compactMap { $0["target"]?.string } == [token(5), "/topics/news"])
            let forOne = try await client.call(.get, "/api/tokens/\(token(1))/messages")
            #expect(forOne.json?["messages"]?.array?.compactMap { $0["target"]?.string } == ["/topics/news"])
            #expect(forOne.json?["messages"]?.array?.first?["recipientCount"] == 3)
            let forFive = try await client.call(.get, "/api/tokens/\(token(5))/messages")
            #expect(forFive.json?["messages"]?.array?.count == 1)
        }
    }

    @Test("Emulator semantics: a well-formed token the project never saw is NotRegistered / UNREGISTERED, and nothing is recorded")
    func unknownTokens() async throws {
        try await Self.withMessaging { client, _ in
            let legacy = try await Self.send(client, #"{"to":"\#(token(77))","data":{"a":"b"}}"#)
            #expect(legacy.json?["results"] == [["error": "NotRegistered"]])
            let plain = try await client.client.execute(
                uri: "/fcm/send", method: .post,
                headers: [.authorization: "key=\(client.key)", .contentType: "application/x-www-form-urlencoded"],
                body: ByteBuffer(string: "registration_id=\(token(77))&data.a=b"))
            #expect(String(buffer: plain.body) == "Error=NotRegistered")
            let v1 = try await Self.v1(client, #"{"message":{"token":"\#(token(77))"}}"#)
            #expect(v1.status == .notFound)
            #expect(v1.json?["error"]?["details"]?.array?.first?["errorCode"] == "UNREGISTERED")
            let log = try await client.call(.get, "/api/messages")
            #expect(log.json?["messages"]?.array?.isEmpty == true)
        }
    }

    @Test("The log keeps the normalized message, not the raw body: unknown fields are gone")
    func normalizedLog() async throws {
        try await Self.withMessaging { client, _ in
            let padding = String(repeating: "x", count: 100_000)
            _ = try await Self.send(client, #"{"to":"/topics/news","data":{"n":"1"},"unknown":"\#(padding)"}"#)
            let log = try await client.call(.get, "/api/messages")
            let payload = try #require(log.json?["messages"]?.array?.first?["payload"]?.string)
            #expect(payload.utf8.count < 1000)
            #expect(!payload.contains("unknown"))
            #expect(payload.contains(#""n":"1""#))
        }
    }

    @Test("Sending needs a server key")
    func unauthenticated() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let reply = try await client.call(.post, "/fcm/send", body: #"{"to":"x"}"#, auth: .some(nil))
            #expect(reply.status == .unauthorized)
        }
    }

    // MARK: - Legacy HTTP, plain text

    @Test(arguments: [
        ("registration_id=TOKEN&data.score=3x1&collapse_key=c", "id=0:"),
        ("data.score=3x1", "Error=MissingRegistration"),
        ("registration_id=not%20a%20token", "Error=InvalidRegistration"),
        ("registration_id=DEAD", "Error=NotRegistered"),
        ("registration_id=TOKEN&data.from=x", "Error=InvalidDataKey"),
        ("registration_id=TOKEN&time_to_live=2419201", "Error=InvalidTtl"),
        ("registration_id=TOKEN&dry_run=1", "id=fake_message_id"),
        ("registration_id=UNKNOWN", "Error=NotRegistered"),
    ])
    func plainText(body: String, answer: String) async throws {
        let form = body.replacingOccurrences(of: "TOKEN", with: token(1)).replacingOccurrences(
            of: "DEAD", with: token(9)
        ).replacingOccurrences(of: "UNKNOWN", with: token(77))
        try await Self.withMessaging { client, _ in
            let reply = try await client.client.execute(
                uri: "/fcm/send", method: .post,
                headers: [
                    .authorization: "key=\(client.key)",
                    .contentType: "application/x-www-form-urlencoded;charset=UTF-8",
                ],
                body: ByteBuffer(string: form))
            #expect(reply.status == .ok)
            #expect(String(buffer: reply.body).hasPrefix(answer))
        }
    }

    // MARK: - HTTP v1

    static func v1(_ client: Fixture.Client, _ json: String) async throws -> Reply {
        try await client.call(.post, "/v1/projects/test-app/messages:send", body: json)
    }

    @Test(
        "v1: success names the message; validate_only answers fake_message_id; a notification key in token reaches its group"
    )
    func v1Success() async throws {
        try await Self.withMessaging { client, key in
            let sent = try await Self.v1(
                client,
                #"{"message":{"token":"\#(token(1))","data":{"a":"b"},"android":{"ttl":"3.5s","priority":"HIGH"}}}"#)
            #expect(sent.status == .ok)
            #expect(sent.json?["name"]?.string?.hasPrefix("projects/test-app/messages/") == true)
            let dry = try await Self.v1(
                client, #"{"validate_only":true,"message":{"topic":"news","notification":{"title":"t"}}}"#)
            #expect(dry.json == ["name": "projects/test-app/messages/fake_message_id"])
            let group = try await Self.v1(client, #"{"message":{"token":"\#(key)"}}"#)
            #expect(group.status == .ok)
        }
    }

    @Test(arguments: [
        (#"{"message":{"data":{"a":"b"}}}"#, "message"),
        (#"{"message":{"token":"TOKEN","topic":"news"}}"#, "message"),
        (#"{"message":{"token":"TOKEN","data":{"a":1}}}"#, "message.data[a]"),
        (#"{"message":{"token":"TOKEN","android":{"ttl":"2419201s"}}}"#, "message.android.ttl"),
        (#"{"message":{"token":"TOKEN","android":{"ttl":"soon"}}}"#, "message.android.ttl"),
        (#"{"message":{"token":"TOKEN","android":{"priority":"URGENT"}}}"#, "message.android.priority"),
        (#"{"message":{"token":"TOKEN","notification":{"title":1}}}"#, "message.notification.title"),
        (
            #"{"message":{"token":"TOKEN","apns":{"headers":{"apns-priority":10}}}}"#,
            "message.apns.headers[apns-priority]"
        ),
        (#"{"message":{"token":"TOKEN","colour":"red"}}"#, "message"),
        (#"{"message":{"topic":"bad topic"}}"#, "message.topic"),
        (#"{"message":{"token":"not a token"}}"#, "message.token"),
    ])
    func v1InvalidArguments(body: String, field: String) async throws {
        try await Self.withMessaging { client, _ in
            let reply = try await Self.v1(client, body.replacingOccurrences(of: "TOKEN", with: token(1)))
            #expect(reply.status == .badRequest)
            #expect(reply.json?["error"]?["status"] == "INVALID_ARGUMENT")
            let details = reply.json?["error"]?["details"]?.array ?? []
            #expect(details.first?["fieldViolations"]?.array?.first?["field"] == .string(field))
            #expect(details.contains { $0["errorCode"] == "INVALID_ARGUMENT" })
        }
    }

    @Test("v1: a bad condition is 'Invalid condition expression provided.' with our diagnostic and its position")
    func v1Condition() async throws {
        try await Self.withMessaging { client, _ in
            let six = (1...6).map { "'t\($0)' in topics" }.joined(separator: " || ")
            let reply = try await Self.v1(client, #"{"message":{"condition":"\#(six)"}}"#)
            #expect(reply.status == .badRequest)
            let details = try #require(reply.json?["error"]?["details"]?.array)
            #expect(
                details[0]["fieldViolations"] == [
                    ["field": "message.condition", "description": "Invalid condition expression provided."]
                ])
            let diagnostic = try #require(details.first { $0["diagnostic"] != nil }?["diagnostic"])
            #expect(diagnostic["kind"] == "tooManyTopics")
            #expect(diagnostic["offset"] == 90)
            let negation = try await Self.v1(client, #"{"message":{"condition":"!('news' in topics)"}}"#)
            #expect(negation.status == .ok)
        }
    }

    @Test("v1: a dead token is 404 with FCM's UNREGISTERED; another project's path is 403")
    func v1Unregistered() async throws {
        try await Self.withMessaging { client, _ in
            let reply = try await Self.v1(client, #"{"message":{"token":"\#(token(9))"}}"#)
            #expect(reply.status == .notFound)
            #expect(reply.json?["error"]?["details"]?.array?.first?["errorCode"] == "UNREGISTERED")
            let other = try await client.call(
                .post, "/v1/projects/other/messages:send", body: #"{"message":{"topic":"news"}}"#)
            #expect(other.status == .forbidden)
        }
    }

    // MARK: - XMPP

    @Test(
        arguments: [
            (#"{"to":"TOKEN","message_id":"m1","data":{"a":"b"}}"#, "ack", nil),
            (#"{"to":"/topics/news","message_id":"m1"}"#, "ack", nil),
            (#"{"to":"not a token","message_id":"m1"}"#, "nack", "BAD_REGISTRATION"),
            (#"{"to":"DEAD","message_id":"m1"}"#, "nack", "DEVICE_UNREGISTERED"),
            (#"{"to":"TOKEN"}"#, "nack", "INVALID_JSON"),
            (#"{"message_id":"m1","data":{"a":"b"}}"#, "nack", "INVALID_JSON"),
            (#"{"to":"TOKEN","message_id":"m1","time_to_live":2419201}"#, "nack", "INVALID_JSON"),
            (#"{"to":"TOKEN","message_id":"m1","data":{"gcm.x":"1"}}"#, "nack", "INVALID_JSON"),
            (#"{"to":"/topics/news","message_id":"m1","data":{"k":"BIG"}}"#, "nack", "INVALID_JSON"),
            (#"{"condition":"!('a' in topics)","message_id":"m1"}"#, "nack", "INVALID_JSON"),
            (#"{"to":"TOKEN","message_id":"m1","message_type":"ack"}"#, "ack", nil),
            (#"{"message_id":"m1","message_type":"ack"}"#, "nack", "BAD_ACK"),
        ] as [(String, String, String?)])
    func xmpp(message: String, type: String, error: String?) async throws {
        let json = message.replacingOccurrences(of: "TOKEN", with: token(1)).replacingOccurrences(
            of: "DEAD", with: token(9)
        )
        .replacingOccurrences(of: "BIG", with: String(repeating: "x", count: 3000))
        try await Self.withMessaging { client, _ in
            let reply = try await client.call(
                .post, "/api/messages:validate", body: #"{"protocol":"xmpp","message":\#(json)}"#)
            #expect(reply.status == .ok)
            #expect(reply.json?["message_type"] == .string(type))
            #expect(reply.json?["error"] == error.map(JSON.string))
            if error != nil { #expect(reply.json?["error_description"]?.string?.isEmpty == false) }
        }
    }

    @Test("messages:validate takes the xmpp protocol only")
    func validateProtocol() async throws {
        try await Self.withMessaging { client, _ in
            let reply = try await client.call(
                .post, "/api/messages:validate", body: #"{"protocol":"smtp","message":{}}"#)
            #expect(reply.status == .badRequest)
        }
    }
}

@Suite("HTTP v1 as 2026 clients send it", .onEveryBackend)
struct V1ClientShapeTests {
    @Test("fid is a target like token; null means not set; camelCase and snake_case names both work")
    func fidNullAndCamelCase() async throws {
        try await MessageAPITests.withMessaging { client, _ in
            let fid = try await MessageAPITests.v1(client, #"{"message":{"fid":"\#(token(1))","data":{"a":"b"}}}"#)
            #expect(fid.status == .ok)
            let unknownFid = try await MessageAPITests.v1(client, #"{"message":{"fid":"\#(token(77))"}}"#)
            #expect(unknownFid.status == .notFound)
            // apprise sends every field, unset ones as null.
            let nulls = try await MessageAPITests.v1(
                client,
                #"{"validate_only":null,"message":{"token":null,"topic":"news","condition":null,"notification":{"title":"t","image":null},"android":null}}"#
            )
            #expect(nulls.status == .ok)
            let camel = try await MessageAPITests.v1(
                client,
                #"{"validateOnly":true,"message":{"token":"\#(token(1))","android":{"collapseKey":"c","restrictedPackageName":"p","ttl":"60s"},"fcmOptions":{"analyticsLabel":"x"}}}"#
            )
            #expect(camel.json == ["name": "projects/test-app/messages/fake_message_id"])
            let both = try await MessageAPITests.v1(client, #"{"message":{"token":"\#(token(1))","fid":"\#(token(2))"}}"#)
            #expect(both.status == .badRequest)
        }
    }
}
