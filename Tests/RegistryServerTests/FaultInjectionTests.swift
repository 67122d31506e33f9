import Foundation
import Hummingbird
import HummingbirdTesting
import Registry
import TestBackends
import Testing

/// Errors the emulator answers on purpose: every FCM error path an app server must handle, in
/// each protocol's words, with `Retry-After` where FCM sends one.
@Suite("Injected faults", .onEveryBackend)
struct FaultInjectionTests {
    private func fixture() async throws -> Fixture {
        let fixture = try await Fixture.make()
        _ = try await fixture.registry.registerToken(token(1), in: fixture.project)
        _ = try await fixture.registry.registerToken(token(2), in: fixture.project)
        return fixture
    }

    private static func v1Send(_ client: Fixture.Client, _ n: Int) async throws -> Reply {
        try await client.call(
            .post, "/v1/projects/test-app/messages:send", body: #"{"message":{"token":"\#(token(n))","data":{"a":"b"}}}"#)
    }

    @Test(
        "v1: each fault answers FCM's status, error status and FcmError code",
        arguments: [
            ("UNREGISTERED", 404, "NOT_FOUND"), ("SENDER_ID_MISMATCH", 403, "PERMISSION_DENIED"),
            ("INVALID_ARGUMENT", 400, "INVALID_ARGUMENT"), ("UNAVAILABLE", 503, "UNAVAILABLE"),
            ("INTERNAL", 500, "INTERNAL"), ("QUOTA_EXCEEDED", 429, "RESOURCE_EXHAUSTED"),
        ])
    func v1(error: String, status: Int, statusName: String) async throws {
        try await fixture().test { client in
            let set = try await client.call(.put, "/api/tokens/\(token(1))/fault", body: #"{"error":"\#(error)","times":1}"#)
            #expect(set.status == .ok)
            #expect(set.json == ["error": .string(error), "times": 1])
            let failed = try await Self.v1Send(client, 1)
            #expect(failed.status.code == status)
            #expect(failed.json?["error"]?["status"]?.string == statusName)
            #expect(failed.json?["error"]?["details"]?.array?.contains { $0["errorCode"]?.string == error } == true)
            // times: 1 — the next send goes through; another token was never affected.
            #expect(try await Self.v1Send(client, 1).status == .ok)
            #expect(try await Self.v1Send(client, 2).status == .ok)
        }
    }

    @Test("Retry-After on UNAVAILABLE and QUOTA_EXCEEDED; a fault without times lasts until deleted")
    func retryAfterAndDeletion() async throws {
        try await fixture().test { client in
            _ = try await client.call(.put, "/api/tokens/\(token(1))/fault", body: #"{"error":"UNAVAILABLE","retryAfter":"1.5s"}"#)
            for _ in 1...3 {
                let reply = try await Self.v1Send(client, 1)
                #expect(reply.status == .serviceUnavailable)
                #expect(reply.headers[.retryAfter] == "2")
            }
            #expect(try await client.call(.delete, "/api/tokens/\(token(1))/fault").status == .ok)
            #expect(try await client.call(.delete, "/api/tokens/\(token(1))/fault").status == .notFound)
            #expect(try await Self.v1Send(client, 1).status == .ok)
            _ = try await client.call(.put, "/api/fault", body: #"{"error":"QUOTA_EXCEEDED","times":1}"#)
            let limited = try await Self.v1Send(client, 2)
            #expect(limited.status == .tooManyRequests)
            #expect(limited.headers[.retryAfter] == "60")
            #expect(try await Self.v1Send(client, 2).status == .ok)
        }
    }

    @Test("Legacy: per-token results in FCM's words; the project's quota fault words a topic send as topics")
    func legacy() async throws {
        try await fixture().test { client in
            _ = try await client.call(.put, "/api/tokens/\(token(1))/fault", body: #"{"error":"UNAVAILABLE","times":1,"retryAfter":"3s"}"#)
            let reply = try await client.call(
                .post, "/fcm/send", body: #"{"registration_ids":["\#(token(1))","\#(token(2))"],"data":{"a":"b"}}"#)
            #expect(reply.json?["results"]?.array?.first == ["error": "Unavailable"])
            #expect(reply.json?["results"]?.array?.last?["message_id"] != nil)
            #expect(reply.headers[.retryAfter] == "3")
            _ = try await client.call(.put, "/api/fault", body: #"{"error":"QUOTA_EXCEEDED","times":1}"#)
            let topic = try await client.call(.post, "/fcm/send", body: #"{"to":"/topics/news","data":{"a":"b"}}"#)
            #expect(topic.json == ["error": "TopicsMessageRateExceeded"])
        }
    }

    @Test("XMPP nacks the fault's code")
    func xmpp() async throws {
        try await fixture().test { client in
            _ = try await client.call(.put, "/api/tokens/\(token(1))/fault", body: #"{"error":"INTERNAL"}"#)
            let reply = try await client.call(
                .post, "/api/messages:validate",
                body: #"{"protocol":"xmpp","message":{"to":"\#(token(1))","message_id":"m1","data":{"a":"b"}}}"#)
            #expect(reply.json?["message_type"] == "nack")
            #expect(reply.json?["error"] == "INTERNAL_SERVER_ERROR")
        }
    }

    @Test(
        "Bad fault requests are refused",
        arguments: [
            #"{"error":"TEAPOT"}"#, #"{"times":1}"#, #"{"error":"INTERNAL","times":0}"#,
            #"{"error":"INTERNAL","retryAfter":"2"}"#, #"{"error":"INTERNAL","retryAfter":"-1s"}"#,
            #"{"error":"INTERNAL","retryAfter":"99999s"}"#,
        ])
    func badRequests(body: String) async throws {
        try await fixture().test { client in
            let reply = try await client.call(.put, "/api/tokens/\(token(1))/fault", body: body)
            #expect(reply.status == .badRequest)
            #expect(reply.json?["error"]?["code"] == "invalid_argument")
            #expect(try await Self.v1Send(client, 1).status == .ok)
        }
    }
}
