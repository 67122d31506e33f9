import Delivery
import FCMRelay
import Foundation
import Hummingbird
import HummingbirdTesting
import Logging
import Registry
import RegistryServer
import TestBackends
import Testing
import XMPPServer

/// The mirror of Google's device groups, against another fcm-registry playing Google: it issues
/// the access tokens, checks the bearer and `project_id` on its `/fcm/notification`, and keeps
/// the groups Google would.
@Suite("The mirror of Google's device groups", .onEveryBackend)
struct MirrorTests {
    /// A mirroring registry in front of a registry playing Google, both with sender 123456789012.
    struct Harness: Sendable {
        let google: Fixture
        let here: RegistryService
        let project: Project
        let client: Fixture.Client

        /// Runs `body` with the mirror pointed at Google, or at `upstream` (a place nothing answers).
        static func run(upstream: String? = nil, _ body: @escaping @Sendable (Harness) async throws -> Void) async throws {
            let google = try await Fixture.make()
            try await google.test(.live) { googleClient in
                let port = try #require(googleClient.client.port)
                var options = RelayOptions()
                options.requestTimeout = .seconds(5)
                let mirror = try GoogleGroupMirror(options: options, logger: Logger(label: "mirror"))
                do {
                    try await withMirror(mirror, google: google, port: port, upstream: upstream, body)
                } catch {
                    try? await mirror.shutdown()
                    throw error
                }
                try await mirror.shutdown()
            }
        }

        private static func withMirror(
            _ mirror: GoogleGroupMirror, google: Fixture, port: Int, upstream: String?,
            _ body: @escaping @Sendable (Harness) async throws -> Void
        ) async throws {
            let here = try await RegistryService(store: try await TestBackend.makeStore(), mirror: mirror)
            try await here.startAudience()
            let (project, key) = try await here.createProject(projectId: "my-app", senderId: "123456789012")
            let (_, file) = try await google.registry.createServiceAccount(
                forProject: "test-app", tokenURI: "http://127.0.0.1:\(port)/token")
            try await here.setMirror(
                try FCMSettings(
                    serviceAccountJSON: try JSONEncoder().encode(file), upstream: upstream ?? "http://127.0.0.1:\(port)"
                ).stored, for: project)
            var settings = HTTPSettings()
            settings.port = 0
            let app = buildApplication(
                registry: here, settings: settings, logger: Logger(label: "here"), sessions: XMPPHub(registry: here))
            try await app.test(.router) { client in
                try await body(
                    Harness(google: google, here: here, project: project, client: Fixture.Client(client: client, key: key)))
            }
        }

        func operate(_ body: String) async throws -> Reply {
            try await client.call(.post, "/fcm/notification", body: body, headers: [.init("project_id")!: "123456789012"])
        }

        /// A group made at Google before the mirror was turned on; returns Google's key.
        func groupAtGoogle(_ name: String, _ tokens: [String]) async throws -> String {
            try await google.registry.createGroup(named: name, tokens: tokens, in: google.project)
        }

        func membersAtGoogle(_ name: String) async throws -> Int? {
            try await google.registry.groupMembers(named: name, in: google.project, after: nil, limit: 100)?.0.memberCount
        }

        func groupHere(_ name: String) async throws -> GroupSummary? {
            try await here.groupMembers(named: name, in: project, after: nil, limit: 100)?.0
        }
    }

    @Test("create goes to Google; Google's answer is the app's, and the group is recorded here, complete, under Google's key")
    func create() async throws {
        try await Harness.run { harness in
            let reply = try await harness.operate(
                #"{"operation":"create","notification_key_name":"chris","registration_ids":["\#(token(1))","\#(token(2))"]}"#)
            #expect(reply.status == .ok)
            let key = try #require(reply.json?["notification_key"]?.string)
            #expect(try await harness.membersAtGoogle("chris") == 2)
            #expect(try await harness.groupHere("chris")?.complete == true)
            #expect(try await harness.groupHere("chris")?.memberCount == 2)
            // Google's key names the group here too.
            #expect(try await harness.here.groupID(forNotificationKey: key, in: harness.project) != nil)
        }
    }

    @Test("A group first met through add is recorded with the members seen, incomplete; remove takes members away here too")
    func incomplete() async throws {
        try await Harness.run { harness in
            let key = try await harness.groupAtGoogle("dana", [token(1), token(2)])
            let added = try await harness.operate(
                #"{"operation":"add","notification_key_name":"dana","notification_key":"\#(key)","registration_ids":["\#(token(3))"]}"#)
            #expect(added.status == .ok)
            #expect(try await harness.membersAtGoogle("dana") == 3)
            let dana = try #require(try await harness.groupHere("dana"))
            #expect(!dana.complete)
            #expect(dana.memberCount == 1)
            let detail = try await harness.client.call(.get, "/api/groups/dana")
            #expect(detail.json?["complete"] == false)
            let listed = try await harness.here.groups(in: harness.project, after: nil, limit: 10, incompleteOnly: true)
            #expect(listed.items.map(\.name) == ["dana"])
            #expect(
                try await harness.here.groupCompleteness(in: harness.project)
                    == GroupCompleteness(complete: 0, incomplete: 1, membersLearned: 1))

            _ = try await harness.operate(
                #"{"operation":"add","notification_key_name":"dana","notification_key":"\#(key)","registration_ids":["\#(token(4))"]}"#)
            #expect(try await harness.groupHere("dana")?.memberCount == 2)
            let removed = try await harness.operate(
                #"{"operation":"remove","notification_key_name":"dana","notification_key":"\#(key)","registration_ids":["\#(token(4))"]}"#)
            #expect(removed.status == .ok)
            #expect(try await harness.membersAtGoogle("dana") == 3)
            #expect(try await harness.groupHere("dana")?.memberCount == 1)
        }
    }

    @Test("What Google refuses, the app gets as Google said it, and nothing is recorded here")
    func refused() async throws {
        try await Harness.run { harness in
            _ = try await harness.groupAtGoogle("taken", [token(1)])
            let reply = try await harness.operate(
                #"{"operation":"create","notification_key_name":"taken","registration_ids":["\#(token(2))"]}"#)
            #expect(reply.status == .badRequest)
            #expect(reply.json == ["error": "notification_key already exists"])
            #expect(try await harness.groupHere("taken") == nil)
            #expect(try await harness.here.token(token(2), in: harness.project) == nil)
        }
    }

    @Test("Google out of reach: 503 with Retry-After in FCM's envelope, nothing recorded")
    func unreachable() async throws {
        try await Harness.run(upstream: "http://127.0.0.1:9") { harness in
            let reply = try await harness.operate(
                #"{"operation":"create","notification_key_name":"lost","registration_ids":["\#(token(1))"]}"#)
            #expect(reply.status == .serviceUnavailable)
            #expect(reply.headers[.retryAfter] == "1")
            #expect(reply.json?["error"]?.string?.hasPrefix("Unavailable") == true)
            #expect(try await harness.groupHere("lost") == nil)
        }
    }

    @Test("A send to an incomplete group's key goes to Google as an HTTP v1 send to that key; a complete group fans out here")
    func sends() async throws {
        try await Harness.run { harness in
            let old = try await harness.groupAtGoogle("old", [token(1), token(2)])
            _ = try await harness.operate(
                #"{"operation":"add","notification_key_name":"old","notification_key":"\#(old)","registration_ids":["\#(token(3))"]}"#)
            let sent = try await harness.client.call(.post, "/fcm/send", body: #"{"to":"\#(old)","data":{"k":"v"}}"#)
            #expect(sent.json == ["success": 1, "failure": 0])
            let atGoogle = try await harness.google.registry.loggedMessages(.all, in: harness.google.project, after: nil, limit: 10)
            #expect(atGoogle.items.count == 1)
            #expect(atGoogle.items.first?.recipientCount == 3, "Google reached the members it knows, all three")
            #expect(atGoogle.items.first?.target == old)
            #expect(try await harness.here.loggedMessages(.all, in: harness.project, after: nil, limit: 10).items.isEmpty)

            let created = try await harness.operate(
                #"{"operation":"create","notification_key_name":"new","registration_ids":["\#(token(4))"]}"#)
            let key = try #require(created.json?["notification_key"]?.string)
            _ = try await harness.client.call(.post, "/fcm/send", body: #"{"to":"\#(key)","data":{"k":"v"}}"#)
            #expect(try await harness.here.loggedMessages(.all, in: harness.project, after: nil, limit: 10).items.count == 1)
            #expect(
                try await harness.google.registry.loggedMessages(.all, in: harness.google.project, after: nil, limit: 10)
                    .items.count == 1)
        }
    }

    @Test("A look-up is Google's answer, and the key it gives names a group known here")
    func lookUp() async throws {
        try await Harness.run { harness in
            _ = try await harness.operate(
                #"{"operation":"create","notification_key_name":"erin","registration_ids":["\#(token(1))"]}"#)
            let looked = try await harness.client.call(
                .get, "/fcm/notification?notification_key_name=erin", headers: [.init("project_id")!: "123456789012"])
            #expect(looked.status == .ok)
            let key = try #require(looked.json?["notification_key"]?.string)
            #expect(try await harness.here.groupID(forNotificationKey: key, in: harness.project) != nil)
        }
    }

    @Test("With the mirror off, calls are answered here alone")
    func off() async throws {
        try await Harness.run { harness in
            try await harness.here.setMirror(nil, for: harness.project)
            let reply = try await harness.operate(
                #"{"operation":"create","notification_key_name":"local","registration_ids":["\#(token(1))"]}"#)
            #expect(reply.status == .ok)
            #expect(try await harness.groupHere("local")?.complete == true)
            #expect(try await harness.membersAtGoogle("local") == nil)
        }
    }
}
