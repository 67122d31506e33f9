import Foundation
import Hummingbird
import HummingbirdTesting
import Registry
import TestBackends
import Testing

@Suite("Authentication", .onEveryBackend)
struct AuthTests {
    @Test("key= and Bearer (with access_token_auth) are accepted")
    func schemes() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            _ = try await client.createGroup("g", [token(1)])
            let bearer = try await client.call(
                .get, "/fcm/notification?notification_key_name=g", auth: .some("Bearer \(fixture.key)"),
                headers: [.init("access_token_auth")!: "true", .init("project_id")!: "123456789012"])
            #expect(bearer.status == .ok)
        }
    }

    @Test("No key, a wrong key and a revoked key are 401 in each family's envelope")
    func unauthenticated() async throws {
        let fixture = try await Fixture.make()
        let (_, spare) = try await fixture.registry.addServerKey(toProject: "test-app")
        try await fixture.registry.revokeServerKey(spare)
        try await fixture.test { client in
            for auth in [String?.none, "key=wrong", "Bearer \(spare)", "Basic abc"] {
                let legacy = try await client.call(.get, "/fcm/notification?notification_key_name=g", auth: .some(auth))
                #expect(legacy.status == .unauthorized)
                #expect(legacy.json?["error"]?.string?.hasPrefix("Unauthorized") == true)
                let iid = try await client.call(.post, "/iid/v1:batchAdd", body: "{}", auth: .some(auth))
                #expect(iid.status == .unauthorized)
                let v1 = try await client.call(
                    .get, "/v1/projects/test-app/registrations/a/topicSubscriptions", auth: .some(auth))
                #expect(v1.status == .unauthorized)
                #expect(v1.json?["error"]?["status"] == "UNAUTHENTICATED")
                let native = try await client.call(.get, "/api/tokens/a", auth: .some(auth))
                #expect(native.json?["error"]?["code"] == "unauthenticated")
            }
        }
    }

    @Test("A project_id header naming another project is refused")
    func projectHeader() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let reply = try await client.call(
                .post, "/fcm/notification",
                body: #"{"operation":"create","notification_key_name":"g","registration_ids":["\#(token(1))"]}"#,
                headers: [.init("project_id")!: "999"])
            #expect(reply.status == .forbidden)
            #expect(try await fixture.registry.store.group(named: "g", in: fixture.project) == nil)
        }
    }

    @Test("One project never sees another's groups, topics or tokens")
    func isolation() async throws {
        let fixture = try await Fixture.make()
        let (other, otherKey) = try await fixture.registry.createProject(projectId: "other", senderId: "555")
        _ = other
        try await fixture.test { client in
            let key = try await client.createGroup("g", [token(1)])
            _ = try await client.call(.post, "/iid/v1/\(token(1))/rel/topics/news")
            let auth: String?? = .some("key=\(otherKey)")
            let lookUp = try await client.call(.get, "/fcm/notification?notification_key_name=g", auth: auth)
            #expect(lookUp.json == ["error": "notification_key not found"])
            let add = try await client.call(
                .post, "/fcm/notification",
                body: #"{"operation":"add","notification_key":"\#(key)","registration_ids":["\#(token(2))"]}"#,
                auth: auth)
            #expect(add.json == ["error": "Error decrypting GroupToken"])
            let info = try await client.call(.get, "/iid/info/\(token(1))?details=true", auth: auth)
            #expect(info.status == .notFound)
            let list = try await client.call(
                .get, "/v1/projects/other/registrations/\(token(1))/topicSubscriptions", auth: auth)
            #expect(list.status == .notFound)
        }
    }
}

@Suite("Envelopes, limits and routing", .onEveryBackend)
struct EnvelopeTests {
    @Test("Bodies over 1 MiB are 413 with an envelope, and change nothing")
    func tooLarge() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let big =
                #"{"operation":"create","notification_key_name":"g","registration_ids":["\#(token(1))"],"pad":""#
                + String(repeating: "x", count: 1 << 20) + #""}"#
            let legacy = try await client.call(.post, "/fcm/notification", body: big)
            #expect(legacy.status == .contentTooLarge)
            #expect(legacy.json == ["error": "the request body is too large"])
            let v1 = try await client.call(
                .post, "/v1/projects/test-app/registrations/a/topicSubscriptions?topic_name=a", body: big)
            #expect(v1.status == .contentTooLarge)
            #expect(v1.json?["error"]?["code"] == 413)
            #expect(try await fixture.registry.store.group(named: "g", in: fixture.project) == nil)
        }
    }

    @Test("Unknown paths are 404 and wrong methods 405, each with a JSON envelope")
    func routing() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let unknown = try await client.call(.get, "/nowhere")
            #expect(unknown.status == .notFound)
            #expect(unknown.json?["error"]?["code"] == "not_found")
            let iid = try await client.call(.get, "/iid/v2/whatever")
            #expect(iid.status == .notFound)
            #expect(iid.json == ["error": "NOT_FOUND"])
            let method = try await client.call(.delete, "/fcm/notification")
            #expect(method.status == .methodNotAllowed)
            #expect(method.headers[.allow] == "GET, POST")
            #expect(method.json == ["error": "DELETE is not allowed on /fcm/notification"])
            let batch = try await client.call(.get, "/iid/v1:batchAdd")
            #expect(batch.status == .methodNotAllowed)
        }
    }

    @Test("Random bytes on every route never crash the server or leak a trace")
    func garbage() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            var generator = SystemRandomNumberGenerator()
            let routes: [(HTTPRequest.Method, String)] = [
                (.post, "/fcm/notification"), (.post, "/iid/v1:batchAdd"), (.post, "/iid/v1:batchRemove"),
                (.post, "/v1/projects/test-app/registrations/a/topicSubscriptions?topic_name=a"),
            ]
            for _ in 0..<50 {
                let bytes = (0..<Int.random(in: 0...300, using: &generator)).map { _ in
                    UInt8.random(in: 0...255, using: &generator)
                }
                for (method, uri) in routes {
                    let reply = try await client.call(method, uri, body: String(decoding: bytes, as: UTF8.self))
                    #expect(reply.status.code < 500)
                    #expect(reply.json != nil)
                }
            }
        }
    }
}

@Suite("Over a real socket", .onEveryBackend)
struct LiveTests {
    @Test("create, look up and subscribe over HTTP/1.1 on loopback")
    func live() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test(.live) { client in
            let key = try await client.createGroup("live", [token(1), token(2)])
            #expect(key.hasPrefix("APA91b"))
            let add = try await client.call(
                .post, "/iid/v1:batchAdd", body: #"{"to":"/topics/live","registration_tokens":["\#(token(1))"]}"#)
            #expect(add.json == ["results": [[:]]])
            let health = try await client.call(.get, "/health", auth: .some(nil))
            #expect(health.json == ["status": "ok"])
        }
    }
}

@Suite("Readiness", .onEveryBackend)
struct ReadinessTests {
    @Test("GET /readyz answers 200 without a key while the database answers and the index is current")
    func ready() async throws {
        let fixture = try await Fixture.make()
        // No follower runs here; a bound a loaded machine cannot outlast keeps the index "current".
        try await fixture.test(readyMaximumLag: .seconds(3600)) { client in
            let reply = try await client.call(.get, "/readyz", auth: .some(nil))
            #expect(reply.status == .ok)
            #expect(reply.json?["ready"] == true)
            #expect(reply.json?["database"] == "reachable")
            #expect(reply.json?["reasons"] == .array([]))
        }
    }

    @Test("GET /readyz answers 503 with Retry-After and the reason once the index has not been current past the bound")
    func behind() async throws {
        let fixture = try await Fixture.make()
        // No follower runs here: the index was last current when the registry opened.
        try await Task.sleep(for: .milliseconds(100))
        try await fixture.test(readyMaximumLag: .milliseconds(50)) { client in
            let reply = try await client.call(.get, "/readyz", auth: .some(nil))
            #expect(reply.status == .serviceUnavailable)
            #expect(reply.headers[.retryAfter] == "1")
            #expect(reply.json?["ready"] == false)
            #expect(reply.json?["reasons"]?.array?.first?.string?.contains("has not been current") == true)
            // /health stays liveness.
            #expect(try await client.call(.get, "/health", auth: .some(nil)).status == .ok)
        }
    }
}

@Suite("Observability", .onEveryBackend)
struct ObservabilityTests {
    @Test("GET /metrics answers Prometheus text without a key, with the index and message-log gauges")
    func metrics() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            _ = try await client.call(
                .post, "/iid/v1:batchAdd", body: #"{"to":"/topics/news","registration_tokens":["\#(token(1))"]}"#)
            _ = try await client.call(.post, "/fcm/send", body: #"{"to":"/topics/news","data":{"a":"b"}}"#)
            // As the feed follower of a running server does.
            try await fixture.registry.catchUp()
            let reply = try await client.client.execute(uri: "/metrics", method: .get) { response in
                (response.status, response.headers[.contentType], String(buffer: response.body))
            }
            #expect(reply.0 == .ok)
            #expect(reply.1?.hasPrefix("text/plain") == true)
            #expect(reply.2.contains("fcm_registry_audience_subscriptions 1.0"))
            #expect(reply.2.contains(#"fcm_registry_message_log_entries{project="test-app"} 1.0"#))
            #expect(reply.2.contains("fcm_registry_feed_lag_entries 0.0"))
            // The route is the template: the token in a path never reaches a metric or a log line.
            #expect(reply.2.contains(#"fcm_registry_http_requests_total{method="POST",route="/fcm/send",status="200"} 1"#))
            _ = try await client.call(.get, "/iid/info/\(token(1))")
            let again = try await client.client.execute(uri: "/metrics", method: .get) { String(buffer: $0.body) }
            #expect(again.contains(#"route="/iid/info/:token""#))
            #expect(!again.contains(token(1)))
        }
    }
}
