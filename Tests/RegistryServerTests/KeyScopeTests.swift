import Foundation
import Hummingbird
import HummingbirdTesting
import Prometheus
import Registry
import TestBackends
import Testing
import XMPPServer

@testable import RegistryServer

/// Scoped keys: one table says which scope each route needs, every route keeps to it, and keys
/// are made, listed, rotated and revoked over `/api/keys`.
@Suite("Scoped keys", .onEveryBackend)
struct KeyScopeTests {
    /// Every recorded route, as `METHOD path`.
    private func recorded() async throws -> [String] {
        let registry = try await RegistryService(store: TestBackend.makeStore())
        return routing(
            registry: registry, metrics: PrometheusCollectorRegistry(), sessions: XMPPHub(registry: registry)
        )
        .routes.map { "\($0.method.rawValue) \($0.path)" }
    }

    @Test("Every route has exactly one entry in the table of scopes, and every entry is a route")
    func tableCoversEveryRoute() async throws {
        let routes = try await recorded()
        let entries = RouteScopes.table.map { "\($0.method.rawValue) \($0.path)" }
        for route in routes {
            #expect(entries.filter { $0 == route }.count == 1, "\(route) needs exactly one entry in RouteScopes.table")
        }
        #expect(Set(entries).subtracting(routes).sorted() == [], "entries no route serves")
    }

    @Test("docs/http-api.md prints the table of scopes as the code has it")
    func documented() throws {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        let text = try String(contentsOf: root.appending(path: "docs/http-api.md"), encoding: .utf8)
        let printed = Set(
            text.split(separator: "\n").map(String.init).filter { line in
                line.hasPrefix("| `") && KeyScope.allCases.contains { line.hasSuffix(" | `\($0.rawValue)` |") }
            })
        let expected = RouteScopes.table.compactMap { route -> String? in
            guard let scope = route.scope else { return nil }
            let path = route.path.split(separator: "/", omittingEmptySubsequences: false).map { segment in
                segment.hasPrefix(":") ? "{\(segment.dropFirst())}" : String(segment)
            }.joined(separator: "/")
            return "| `\(route.method.rawValue)` | `\(path)` | `\(scope.rawValue)` |"
        }
        #expect(Set(expected).subtracting(printed).sorted() == [], "rows missing from docs/http-api.md")
        #expect(printed.subtracting(expected).sorted() == [], "rows the code does not have")
    }

    /// A path with every parameter filled in.
    private static func concrete(_ template: String) -> String {
        template.split(separator: "/", omittingEmptySubsequences: false).map { segment -> String in
            var segment = String(segment)
            for (name, value) in [
                ("{token}", token(1)), ("{id}", "999"), (":token", token(1)), (":topic", "news"),
                (":project", "test-app"), (":name", "g"), (":id", "999"), (":account", "a"), (":file", "main.js"),
            ] where segment.hasPrefix(name) {
                segment = value + segment.dropFirst(name.count)
            }
            return segment
        }.joined(separator: "/")
    }

    @Test("Every route tried with a key of each single scope answers as the table says")
    func everyRouteWithEverySingleScope() async throws {
        let fixture = try await Fixture.make()
        var keys: [KeyScope: String] = [:]
        for scope in KeyScope.allCases {
            keys[scope] = try await fixture.registry.addServerKey(
                toProject: "test-app", name: scope.rawValue, scopes: KeyScopes(scope)
            ).serverKey
        }
        _ = try await fixture.registry.registerToken(token(1), in: fixture.project)
        try await fixture.test { [keys] client in
            for route in RouteScopes.table {
                guard let needed = route.scope else { continue }
                let path = Self.concrete(route.path)
                for scope in KeyScope.allCases {
                    let body: String? = [.post, .put, .patch].contains(route.method) ? "{}" : nil
                    let reply = try await client.client.execute(
                        uri: path, method: route.method,
                        headers: [.authorization: "key=\(keys[scope]!)", .contentType: "application/json"],
                        body: body.map { ByteBuffer(string: $0) }
                    ) { ($0.status, String(buffer: $0.body)) }
                    let refused = reply.0 == .forbidden && reply.1.contains("lacks the \(needed.rawValue) scope")
                    let allowed = scope == .admin || scope == needed
                    #expect(
                        refused != allowed,
                        "\(route.method) \(route.path) with a \(scope) key: \(reply.0) \(reply.1.prefix(200))")
                    guard refused else { continue }
                    switch APIFamily(path: path) {
                    case .v1: #expect(reply.1.contains("\"PERMISSION_DENIED\""))
                    case .native: #expect(reply.1.contains("\"permission_denied\""))
                    case .legacy, .instanceID: break
                    }
                }
            }
        }
    }

    @Test("A subscribe key registers and subscribes, and cannot send or delete")
    func subscribeKey() async throws {
        let fixture = try await Fixture.make()
        let (_, _, key) = try await fixture.registry.addServerKey(
            toProject: "test-app", name: "mobile backend", scopes: .subscribe)
        try await fixture.test { client in
            let auth: String?? = .some("key=\(key)")
            #expect(try await client.call(.put, "/api/tokens/\(token(1))", body: "{}", auth: auth).status == .ok)
            let subscribe = try await client.call(
                .post, "/iid/v1:batchAdd", body: #"{"to":"/topics/news","registration_tokens":["\#(token(1))"]}"#,
                auth: auth)
            #expect(subscribe.status == .ok)
            let send = try await client.call(
                .post, "/v1/projects/test-app/messages:send", body: #"{"message":{"topic":"news"}}"#, auth: auth)
            #expect(send.status == .forbidden)
            #expect(send.json?["error"]?["status"] == "PERMISSION_DENIED")
            let delete = try await client.call(.delete, "/api/tokens/\(token(1))", auth: auth)
            #expect(delete.status == .forbidden)
            #expect(delete.json?["error"]?["code"] == "permission_denied")
            #expect(delete.json?["error"]?["message"]?.string?.contains("admin") == true)
        }
        #expect(try await fixture.registry.token(token(1), in: fixture.project)?.state == .registered)
    }

    @Test("Keys over the API: made with scopes, listed without the key, rotated with a grace period, revoked")
    func keysOverTheAPI() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let created = try await client.call(
                .post, "/api/keys", body: #"{"name":"marketing dashboard","scopes":["send","read"]}"#)
            #expect(created.status == .created)
            #expect(created.json?["scopes"] == ["send", "read"])
            let id = try #require(created.json?["id"]?.string)
            let key = try #require(created.json?["key"]?.string)
            #expect(try await client.call(.get, "/api/project", auth: .some("key=\(key)")).status == .ok)
            #expect(try await client.call(.get, "/api/keys", auth: .some("key=\(key)")).status == .forbidden)

            let listed = try await client.call(.get, "/api/keys")
            let keys = try #require(listed.json?["keys"]?.array)
            #expect(keys.count == 2)
            #expect(keys.last?["name"] == "marketing dashboard")
            #expect(keys.last?["lastUsedAt"]?.string != nil)
            #expect(!String(describing: listed.json).contains(key))

            let tooLong = try await client.call(.post, "/api/keys/\(id):rotate", body: #"{"gracePeriod":"604801s"}"#)
            #expect(tooLong.status == .badRequest)
            #expect(
                try await client.call(.post, "/api/keys", body: #"{"name":"x","scopes":["write"]}"#).status
                    == .badRequest)
            #expect(try await client.call(.post, "/api/keys", body: #"{"name":"x","scopes":[]}"#).status == .badRequest)

            let rotated = try await client.call(.post, "/api/keys/\(id):rotate", body: #"{"gracePeriod":"86400s"}"#)
            #expect(rotated.status == .created)
            #expect(rotated.json?["name"] == "marketing dashboard")
            #expect(rotated.json?["scopes"] == ["send", "read"])
            let newKey = try #require(rotated.json?["key"]?.string)
            let newID = try #require(rotated.json?["id"]?.string)
            // Both work during the grace period.
            #expect(try await client.call(.get, "/api/project", auth: .some("key=\(key)")).status == .ok)
            #expect(try await client.call(.get, "/api/project", auth: .some("key=\(newKey)")).status == .ok)

            // Rotated again, a key in its grace period keeps the earlier end.
            let ends = { () async throws -> String? in
                try await client.call(.get, "/api/keys").json?["keys"]?.array?.first { $0["id"]?.string == id }?[
                    "revokedAt"]?.string
            }
            let end = try await ends()
            let again = try await client.call(.post, "/api/keys/\(id):rotate", body: #"{"gracePeriod":"172800s"}"#)
            #expect(again.status == .created)
            #expect(try await ends() == end)
            #expect(try await client.call(.delete, "/api/keys/\(try #require(again.json?["id"]?.string))").status == .noContent)

            #expect(try await client.call(.delete, "/api/keys/\(id)").status == .noContent)
            #expect(try await client.call(.get, "/api/project", auth: .some("key=\(key)")).status == .unauthorized)
            #expect(try await client.call(.delete, "/api/keys/\(id)").status == .notFound)
            #expect(try await client.call(.delete, "/api/keys/\(newID)").status == .noContent)

            // The project's last admin key stays.
            let admin = try #require(
                try await client.call(.get, "/api/keys").json?["keys"]?.array?.first?["id"]?.string)
            let last = try await client.call(.delete, "/api/keys/\(admin)")
            #expect(last.status == .conflict)
            #expect(last.json?["error"]?["code"] == "failed_precondition")
            #expect(try await client.call(.get, "/api/keys").status == .ok)
        }
    }

    @Test("A key revoked on one server stops working on another within a second")
    func revocationOnASecondServer() async throws {
        let store = try await TestBackend.makeStore()
        let first = try await RegistryService(store: store)
        let second = try await RegistryService(store: try await TestBackend.reopen(store))
        let (project, _) = try await first.createProject(projectId: "test-app", senderId: "123456789012")
        let (_, record, key) = try await first.addServerKey(toProject: "test-app", name: "app", scopes: .send)
        #expect(try await second.grant(authenticatedBy: key)?.scopes == .send)
        _ = try await first.revokeServerKey(id: record.id, in: project)
        #expect(try await first.grant(authenticatedBy: key) == nil)
        let deadline = ContinuousClock.now + .seconds(3)
        while try await second.grant(authenticatedBy: key) != nil, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(100))
        }
        #expect(try await second.grant(authenticatedBy: key) == nil)
    }

    @Test("A key's last use is written once a minute, not once a request")
    func lastUsedToTheMinute() async throws {
        let registry = try await RegistryService(store: TestBackend.makeStore())
        let (project, key) = try await registry.createProject(projectId: "test-app", senderId: "123456789012")
        let minute = Date(timeIntervalSince1970: 1_800_000_000)
        for second in [0.0, 10, 59] {
            _ = try await registry.grant(authenticatedBy: key, now: minute.addingTimeInterval(second))
        }
        #expect(try await registry.serverKeys(in: project).first?.lastUsedAt == minute)
        // Written straight into the store, a later use there is not overwritten by this minute's.
        _ = try await registry.grant(authenticatedBy: key, now: minute.addingTimeInterval(61))
        #expect(try await registry.serverKeys(in: project).first?.lastUsedAt == minute.addingTimeInterval(60))
    }

    @Test("Keys made before scopes, and keys made without any, have every scope")
    func defaults() async throws {
        let registry = try await RegistryService(store: TestBackend.makeStore())
        let (project, key) = try await registry.createProject(projectId: "test-app", senderId: "123456789012")
        #expect(try await registry.grant(authenticatedBy: key)?.scopes == .all)
        #expect(try await registry.serverKeys(in: project).map(\.scopes) == [.all])
        #expect(throws: RegistryError.self) { try KeyScopes(names: []) }
        #expect(KeyScopes.read.allows(.read) && !KeyScopes.read.allows(.send) && KeyScopes.admin.allows(.send))
    }

    @Test("A service account's access tokens send, subscribe and read, never administer, unless given scopes")
    func serviceAccountScopes() async throws {
        let fixture = try await Fixture.make()
        let (_, standard) = try await fixture.registry.createServiceAccount(forProject: "test-app")
        let (_, reader) = try await fixture.registry.createServiceAccount(forProject: "test-app", scopes: .read)
        try await fixture.test { client in
            let fcm = "Bearer " + (try #require(try await OAuthTests.exchange(client, try OAuthTests.assertion(standard)).json?["access_token"]?.string))
            let read = "Bearer " + (try #require(try await OAuthTests.exchange(client, try OAuthTests.assertion(reader)).json?["access_token"]?.string))
            let send = #"{"message":{"topic":"news"}}"#
            #expect(try await client.call(.post, "/v1/projects/test-app/messages:send", body: send, auth: .some(fcm)).status == .ok)
            #expect(try await client.call(.get, "/api/keys", auth: .some(fcm)).status == .forbidden)
            #expect(try await client.call(.get, "/api/groups", auth: .some(read)).status == .ok)
            let refused = try await client.call(.post, "/v1/projects/test-app/messages:send", body: send, auth: .some(read))
            #expect(refused.status == .forbidden)
            #expect(refused.json?["error"]?["status"] == "PERMISSION_DENIED")
        }
        #expect(try await fixture.registry.serviceAccounts(in: fixture.project).map(\.scopes) == [nil, .read])
    }


    @Test("An XMPP (CCS) session signs in with a key that has the send scope, never with one without")
    func xmppNeedsSend() async throws {
        try await XMPPFixture.run { xmpp in
            let (_, _, reader) = try await xmpp.fixture.registry.addServerKey(
                toProject: "test-app", name: "reader", scopes: .read)
            let (_, _, sender) = try await xmpp.fixture.registry.addServerKey(
                toProject: "test-app", name: "sender", scopes: .send)
            _ = try await xmpp.login(secret: sender)
            let connection = try RawConnection(port: xmpp.port)
            await connection.send(XMPPFixture.header)
            _ = await connection.read(until: "</stream:features>")
            let credentials = Data("\0123456789012\0\(reader)".utf8).base64EncodedString()
            await connection.send(#"<auth xmlns="urn:ietf:params:xml:ns:xmpp-sasl" mechanism="PLAIN">\#(credentials)</auth>"#)
            let (text, closed) = await connection.readUntilClosed()
            #expect(text.contains("<not-authorized/>"))
            #expect(closed)
        }
    }

}
