import Foundation
import HTTPTypes
import Hummingbird
import HummingbirdTesting
import Registry
import TestBackends
import Testing

@testable import RegistryServer

/// The audit log: every change made with an `admin` route and every key event is one entry, in
/// the change's own transaction, never with a secret; `GET /api/audit` reads it newest first.
@Suite("Audit log", .onEveryBackend)
struct AuditLogTests {
    private static let console: HTTPFields = [AuditController.clientHeader: "console"]

    private func entries(_ client: Fixture.Client, _ query: String = "") async throws -> [JSON] {
        let reply = try await client.call(.get, "/api/audit\(query)")
        #expect(reply.status == .ok)
        return try #require(reply.json?["entries"]?.array)
    }

    @Test("Key and webhook changes write one entry each, naming the key and client, never a secret")
    func changesAreAudited() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let created = try await client.call(
                .post, "/api/keys", body: #"{"name":"dashboard","scopes":["read"]}"#, headers: Self.console)
            let id = try #require(created.json?["id"]?.string)
            let key = try #require(created.json?["key"]?.string)
            let hook = try await client.call(
                .post, "/api/webhooks",
                body: #"{"url":"https://93.184.215.14/hook?token=s3cret","events":["token.unregistered"]}"#,
                headers: Self.console)
            #expect(hook.status == .created)
            let hookID = try #require(hook.json?["id"]?.string)
            let secret = try #require(hook.json?["secret"]?.string)
            let rotated = try await client.call(.post, "/api/webhooks/\(hookID):rotateSecret")
            let newSecret = try #require(rotated.json?["secret"]?.string)
            #expect(try await client.call(.delete, "/api/webhooks/\(hookID)").status == .noContent)
            let rotatedKey = try await client.call(.post, "/api/keys/\(id):rotate", body: #"{"gracePeriod":"60s"}"#)
            let newKey = try #require(rotatedKey.json?["key"]?.string)
            let newID = try #require(rotatedKey.json?["id"]?.string)
            #expect(try await client.call(.delete, "/api/keys/\(newID)", headers: Self.console).status == .noContent)

            let reply = try await client.call(.get, "/api/audit")
            var all = try #require(reply.json?["entries"]?.array)
            let admin = try #require(
                try await client.call(.get, "/api/keys").json?["keys"]?.array?.first?["id"]?.string)
            // The oldest: the project's first key, made on the database's machine.
            let first = try #require(all.last)
            all.removeLast()
            #expect(first["action"] == "key.created")
            #expect(first["target"]?.string == admin)
            #expect(first["keyId"] == .null)
            #expect(first["client"] == "cli")
            #expect(first["details"] == ["name": "", "scopes": "send subscribe read admin"])
            #expect(
                all.map { $0["action"]?.string ?? "" } == [
                    "key.revoked", "key.rotated", "webhook.deleted", "webhook.secretRotated", "webhook.created",
                    "key.created",
                ])
            #expect(all.allSatisfy { $0["keyId"]?.string == admin })
            #expect(all.map { $0["client"]?.string ?? "" } == ["console", "api", "api", "api", "console", "console"])
            #expect(all[0]["target"]?.string == newID)
            #expect(all[1]["target"]?.string == id)
            #expect(all[1]["details"]?["newKeyId"]?.string == newID)
            #expect(all[1]["details"]?["gracePeriod"]?.string == "60s")
            #expect(all[4]["target"]?.string == hookID)
            #expect(all[4]["details"]?["url"]?.string == "https://93.184.215.14/hook")
            #expect(all[5]["details"]?["scopes"]?.string == "read")
            #expect(all[5]["details"]?["name"]?.string == "dashboard")
            #expect(all[5]["at"]?.string != nil)
            let text = String(describing: reply.json)
            for secretValue in [key, newKey, secret, newSecret, "s3cret", fixture.key] {
                #expect(!text.contains(secretValue))
            }
        }
    }

    @Test("A refused change writes no entry; a refusal met after the entry rolls both back")
    func refusedChangesWriteNothing() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let before = try await entries(client)
            #expect(before.map { $0["action"] } == ["key.created"])
            #expect(
                try await client.call(.post, "/api/keys", body: #"{"name":"x","scopes":["write"]}"#).status
                    == .badRequest)
            #expect(try await client.call(.delete, "/api/keys/999").status == .notFound)
            #expect(try await client.call(.delete, "/api/webhooks/wh_none").status == .notFound)
            #expect(try await client.call(.post, "/api/webhooks/wh_none:rotateSecret").status == .notFound)
            #expect(
                try await client.call(
                    .post, "/api/webhooks", body: #"{"url":"ftp://x","events":["token.unregistered"]}"#
                )
                .status == .badRequest)
            #expect(try await client.call(.delete, "/api/fault").status == .notFound)
            // The project's last admin key: the store writes the entry, then meets the refusal.
            let admin = try #require(
                try await client.call(.get, "/api/keys").json?["keys"]?.array?.first?["id"]?.string)
            #expect(try await client.call(.delete, "/api/keys/\(admin)").status == .conflict)
            #expect(try await entries(client) == before)
            #expect(try await client.call(.get, "/api/project").status == .ok)
        }
    }

    @Test("Faults, unregistered tokens, and keys the command line makes and revokes, are audited")
    func faultsAndCommandLine() async throws {
        let fixture = try await Fixture.make()
        let (_, record, key) = try await fixture.registry.addServerKey(
            toProject: "test-app", name: "ops", scopes: .send)
        try await fixture.registry.revokeServerKey(key)
        try await fixture.test { client in
            #expect(
                try await client.call(.put, "/api/fault", body: #"{"error":"UNAVAILABLE","times":2}"#).status == .ok)
            #expect(try await client.call(.delete, "/api/fault").status == .ok)
            #expect(try await client.call(.put, "/api/tokens/\(token(1))", body: "{}").status == .ok)
            #expect(try await client.call(.delete, "/api/tokens/\(token(1))").status == .ok)
            #expect(try await client.call(.delete, "/api/tokens/\(token(2))").status == .notFound)
            let all = try await entries(client)
            #expect(
                all.map { $0["action"]?.string ?? "" } == [
                    "token.unregistered", "fault.cleared", "fault.injected", "key.revoked", "key.created",
                    "key.created",
                ])
            #expect(all[0]["target"]?.string == token(1))
            #expect(all[2]["target"]?.string == "*")
            #expect(all[2]["details"]?["error"]?.string == "UNAVAILABLE")
            #expect(all[2]["details"]?["times"]?.string == "2")
            for entry in all[3...4] {
                #expect(entry["keyId"] == .null)
                #expect(entry["client"]?.string == "cli")
                #expect(entry["target"]?.string == String(record.id))
            }
            #expect(!String(describing: all).contains(key))
        }
    }

    @Test("Relay and mirror turned on and off by the command line are audited, with their settings but no secret")
    func relayAndMirror() async throws {
        let fixture = try await Fixture.make()
        let secret = "-----BEGIN PRIVATE KEY-----audit-test"
        let settings = ChannelSettings(
            channel: "fcm-v1",
            settings: ["firebaseProjectId": .string("fb-audit"), "upstream": .string("http://127.0.0.1:9")],
            secrets: ["privateKey": .string(secret)])
        try await fixture.registry.setRelay(projectId: "test-app", settings)
        try await fixture.registry.turnRelayOff(projectId: "test-app")
        try await fixture.registry.setMirror(settings, for: fixture.project)
        try await fixture.registry.setMirror(nil, for: fixture.project)
        try await fixture.test { client in
            let all = try await entries(client)
            #expect(
                all.prefix(4).map { $0["action"]?.string ?? "" } == [
                    "mirror.disabled", "mirror.enabled", "relay.disabled", "relay.enabled",
                ])
            for entry in all.prefix(4) {
                #expect(entry["client"]?.string == "cli" && entry["target"]?.string == "test-app")
            }
            #expect(all[3]["details"]?["channel"]?.string == "fcm-v1")
            #expect(all[3]["details"]?["firebaseProjectId"]?.string == "fb-audit")
            #expect(all[1]["details"]?["upstream"]?.string == "http://127.0.0.1:9")
            #expect(!String(describing: all).contains("PRIVATE KEY"))
        }
    }

    @Test("GET /api/audit: newest first, by action, since a time, in pages; 400 for bad parameters; read scope")
    func listing() async throws {
        let fixture = try await Fixture.make()
        for index in 0..<5 {
            _ = try await fixture.registry.addServerKey(toProject: "test-app", name: "k\(index)", scopes: .read)
        }
        let (_, _, sender) = try await fixture.registry.addServerKey(toProject: "test-app", name: "s", scopes: .send)
        let (_, _, reader) = try await fixture.registry.addServerKey(toProject: "test-app", name: "r", scopes: .read)
        try await fixture.test { client in
            var names: [String] = []
            var token: String?
            var pages = 0
            repeat {
                let query = "?action=key.created&pageSize=3" + (token.map { "&pageToken=\($0)" } ?? "")
                let reply = try await client.call(.get, "/api/audit\(query)", auth: .some("key=\(reader)"))
                #expect(reply.status == .ok)
                names += (reply.json?["entries"]?.array ?? []).map { $0["details"]?["name"]?.string ?? "" }
                token = reply.json?["nextPageToken"]?.string
                pages += 1
            } while token != nil && pages < 10
            #expect(names == ["r", "s", "k4", "k3", "k2", "k1", "k0", ""])
            #expect(pages == 3)
            #expect(try await entries(client, "?action=webhook.created") == [])
            #expect(try await entries(client, "?since=2999-01-01T00:00:00Z") == [])
            #expect(try await entries(client, "?since=2020-01-01T00:00:00.5Z").count == 8)
            for bad in [
                "?action=key.made", "?since=yesterday", "?pageSize=0", "?pageSize=x", "?pageToken=bm9wZQ",
            ] {
                let reply = try await client.call(.get, "/api/audit\(bad)")
                #expect(reply.status == .badRequest, "\(bad)")
                #expect(reply.json?["error"]?["code"] == "invalid_argument", "\(bad)")
            }
            let refused = try await client.call(.get, "/api/audit", auth: .some("key=\(sender)"))
            #expect(refused.status == .forbidden)
            #expect(refused.json?["error"]?["code"] == "permission_denied")
        }
    }

    @Test("Entries past the retention are not listed, and writes sweep them")
    func retention() async throws {
        let fixture = try await Fixture.make()
        let now = Date()
        let old = AuditEntry(
            project: fixture.project.rowID, at: now.addingTimeInterval(-91 * 86_400), keyID: nil, keyName: "",
            client: "cli", action: AuditAction.keyCreated.rawValue, target: "old")
        try await fixture.registry.auditLog.appendAudit(AuditWrite(entry: old, sweepBefore: 0))
        let stored = { () async throws -> [AuditEntry] in
            try await fixture.registry.auditLog.auditEntries(
                of: fixture.project.rowID, action: nil, since: 0, before: nil, limit: 10)
        }
        // The project's first key, and the old entry.
        #expect(try await stored().map(\.target).first == "old")
        #expect(try await stored().count == 2)
        let firstKey = try #require(try await fixture.registry.serverKeys(in: fixture.project).first?.id)
        try await fixture.test { client in
            let listed = try await entries(client)
            #expect(listed.map { $0["target"]?.string } == [String(firstKey)])
        }
        let (_, record, _) = try await fixture.registry.addServerKey(toProject: "test-app", name: "new", scopes: .read)
        #expect(try await stored().count == 2)
        #expect(try await stored().first?.target == String(record.id))
        #expect(try await !stored().contains { $0.target == "old" })
    }

    @Test("Enabling and retrying a webhook are one entry each; the client's name is bounded and sanitized")
    func webhookActionsAndClientNames() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let hook = try await client.call(
                .post, "/api/webhooks", body: #"{"url":"https://93.184.215.14/h","events":["token.unregistered"]}"#,
                headers: [AuditController.clientHeader: "deploy bot/2.1 <ci>"])
            let id = try #require(hook.json?["id"]?.string)
            #expect(try await client.call(.post, "/api/webhooks/\(id):enable").status == .ok)
            #expect(try await client.call(.post, "/api/webhooks/\(id):retry").status == .ok)
            #expect(try await client.call(.post, "/api/webhooks/wh_none:retry").status == .notFound)
            let all = try await entries(client, "?pageSize=3")
            #expect(
                all.map { $0["action"]?.string ?? "" } == ["webhook.retried", "webhook.enabled", "webhook.created"])
            #expect(all.allSatisfy { $0["target"]?.string == id })
            #expect(all[2]["client"]?.string == "deploy bot/2.1 _ci_")
        }
        #expect(AuditActor.client(from: nil) == "api")
        #expect(AuditActor.client(from: "") == "api")
        #expect(AuditActor.client(from: "con\u{7}sole\u{301}é") == "con_sole__")
        #expect(AuditActor.client(from: String(repeating: "x", count: 500)) == String(repeating: "x", count: 64))
    }

    @Test("GET /api/keys/current answers each key its own id, name and scopes")
    func currentKey() async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            for scope in KeyScope.allCases {
                let (_, record, key) = try await fixture.registry.addServerKey(
                    toProject: "test-app", name: "only \(scope.rawValue)", scopes: KeyScopes(scope))
                let reply = try await client.call(.get, "/api/keys/current", auth: .some("key=\(key)"))
                #expect(reply.status == .ok)
                #expect(reply.json?["id"]?.string == String(record.id))
                #expect(reply.json?["name"]?.string == "only \(scope.rawValue)")
                #expect(reply.json?["scopes"] == [.string(scope.rawValue)])
                #expect(reply.json?["accessToken"] == false)
            }
            #expect(try await client.call(.get, "/api/keys/current", auth: .some(nil)).status == .unauthorized)
        }
    }
}
