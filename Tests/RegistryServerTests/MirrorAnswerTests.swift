import FCMRelay
import Foundation
import Hummingbird
import HummingbirdTesting
import Registry
import TestBackends
import Testing

/// The mirror against a Google that answers what it should not: a 200 without a usable key, a
/// refusal of the mirror's service account, a key this registry cannot record. The app is told
/// what is true, in FCM's device-group envelope, and never a success for something not recorded.
@Suite("The mirror, when Google's answer cannot be used", .onEveryBackend)
struct MirrorAnswerTests {
    /// A stand-in for Google's `/fcm/notification` answering `answer` to every call; tokens still
    /// come from the registry playing Google in `MirrorTests.Harness`.
    static func withGoogle(
        answering answer: @escaping @Sendable (Request) -> Response,
        _ body: @escaping @Sendable (MirrorTests.Harness) async throws -> Void
    ) async throws {
        let router = Router()
        router.on("/fcm/notification", method: .post) { request, _ in answer(request) }
        router.on("/fcm/notification", method: .get) { request, _ in answer(request) }
        let standIn = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)))
        try await standIn.test(.live) { client in
            let port = try #require(client.port)
            try await MirrorTests.Harness.run(upstream: "http://127.0.0.1:\(port)", body)
        }
    }

    static func answer(_ contentType: String, _ bytes: [UInt8], status: HTTPResponse.Status = .ok) -> Response {
        Response(
            status: status, headers: [.contentType: contentType], body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }

    static let create = #"{"operation":"create","notification_key_name":"kim","registration_ids":["\#(token(1))"]}"#

    static let unusable: [(String, String, [UInt8])] = [
        ("an HTML page", "text/html", Array("<html><body>Service temporarily moved</body></html>".utf8)),
        ("a bare number", "application/json", Array("12345".utf8)),
        ("bytes that are not UTF-8", "application/json", [0xFF, 0xFE, 0x7B, 0x00, 0xC3]),
        ("a key that is not Google's", "application/json", Array(#"{"notification_key":"not a key"}"#.utf8)),
        ("no key", "application/json", Array(#"{"ok":true}"#.utf8)),
        ("an empty body", "application/json", []),
        (
            "10 MB", "application/json",
            Array(#"{"notification_key":"APA91bTenMegabytes","padding":""#.utf8)
                + Array(repeating: 0x61, count: 10 << 20)
                + Array(#""}"#.utf8)
        ),
    ]

    @Test(
        "Google's 200 without a usable notification_key: 502 in FCM's words naming Google's answer, nothing recorded",
        arguments: 0..<unusable.count)
    func unusableAnswer(index: Int) async throws {
        let (label, contentType, bytes) = Self.unusable[index]
        try await Self.withGoogle(answering: { _ in Self.answer(contentType, bytes) }) { harness in
            for call in [
                Self.create,
                #"{"operation":"add","notification_key_name":"kim","notification_key":"APA91bKimsKey","registration_ids":["\#(token(2))"]}"#,
            ] {
                let reply = try await harness.operate(call)
                #expect(reply.status == .badGateway, "\(label)")
                let words = try #require(reply.json?["error"]?.string, "\(label)")
                #expect(words.contains("Google's device-group API answered 200 without a usable notification_key"))
                #expect(words.contains("nothing was recorded"))
            }
            let looked = try await harness.client.call(
                .get, "/fcm/notification?notification_key_name=kim", headers: [.init("project_id")!: "123456789012"])
            #expect(looked.status == .badGateway, "\(label)")
            #expect(try await harness.groupHere("kim") == nil, "\(label)")
            #expect(try await harness.here.token(token(1), in: harness.project) == nil, "\(label)")
        }
    }

    @Test(
        "Google's 401 or 403 is the mirror's service account refused: 502 naming it, not the app's 401",
        arguments: [401, 403])
    func serviceAccountRefused(status: Int) async throws {
        try await Self.withGoogle(answering: { _ in
            Self.answer("application/json", Array(#"{"error":"Unauthorized"}"#.utf8), status: .init(code: status))
        }) { harness in
            let reply = try await harness.operate(Self.create)
            #expect(reply.status == .badGateway)
            let words = try #require(reply.json?["error"]?.string)
            #expect(words.hasPrefix("Google refused the mirror's service account"))
            #expect(words.contains("HTTP \(status): \"Unauthorized\""))
            #expect(words.contains("nothing was changed"))
            #expect(try await harness.groupHere("kim") == nil)
        }
    }

    @Test("Google accepts what cannot be recorded here: an error saying so, never 200; look-ups keep answering")
    func notRecorded() async throws {
        // A Google that gives every group the same key: the second group's key names the first here.
        let key = "APA91bTheSameKeyForEveryGroup"
        try await Self.withGoogle(answering: { _ in
            Self.answer("application/json", Array(#"{"notification_key":"\#(key)"}"#.utf8))
        }) { harness in
            let first = try await harness.operate(Self.create)
            #expect(first.status == .ok)
            #expect(try await harness.groupHere("kim")?.memberCount == 1)
            let second = try await harness.operate(
                #"{"operation":"create","notification_key_name":"lee","registration_ids":["\#(token(2))"]}"#)
            #expect(second.status == .internalServerError)
            let words = try #require(second.json?["error"]?.string)
            #expect(words.hasPrefix("Google accepted the create, but this registry could not record it"))
            #expect(words.contains("already names group kim"))
            #expect(try await harness.groupHere("lee") == nil)

            // lee becomes known here through an add under the key the app holds; Google's look-up
            // key for it names kim here, and cannot be kept for lee.
            let added = try await harness.operate(
                #"{"operation":"add","notification_key_name":"lee","notification_key":"APA91bLeesOwnKey","registration_ids":["\#(token(2))"]}"#
            )
            #expect(added.status == .ok)
            #expect(try await harness.groupHere("lee")?.memberCount == 1)
            for name in ["kim", "lee"] {
                let looked = try await harness.client.call(
                    .get, "/fcm/notification?notification_key_name=\(name)",
                    headers: [.init("project_id")!: "123456789012"])
                #expect(looked.status == .ok, "\(name)")
                #expect(looked.json?["notification_key"]?.string == key, "\(name)")
            }
        }
    }
}

/// The mirror's project against a Google whose service account belongs to another sender: the
/// refusal names what the call carried, an access token, and reads as the mirror's configuration.
@Suite("The mirror's project_id refused", .onEveryBackend)
struct MirrorProjectIDTests {
    @Test("A sender the service account does not hold: 502 naming the mirror's service account and the access token")
    func otherSender() async throws {
        try await MirrorTests.Harness.run { harness in
            let (other, key) = try await harness.here.createProject(projectId: "other-app", senderId: "999999999999")
            try await harness.here.setMirror(try await harness.here.mirrorSettings(of: harness.project), for: other)
            let client = Fixture.Client(client: harness.client.client, key: key)
            let reply = try await client.call(
                .post, "/fcm/notification",
                body: #"{"operation":"create","notification_key_name":"kim","registration_ids":["\#(token(1))"]}"#,
                headers: [.init("project_id")!: "999999999999"])
            #expect(reply.status == .badGateway)
            let words = try #require(reply.json?["error"]?.string)
            #expect(words.hasPrefix("Google refused the mirror's service account"))
            #expect(words.contains("HTTP 403"))
            #expect(words.contains("the project_id header names another project than the access token's"))
            #expect(!words.contains("server key's"))
        }
    }
}

/// The mirror's service account revoked at Google: its token endpoint refuses it.
@Suite("The mirror's service account revoked", .onEveryBackend)
struct MirrorRevokedAccountTests {
    @Test("A token endpoint refusing the service account: 502 naming the account, not 503 'cannot be reached'")
    func revoked() async throws {
        try await MirrorTests.Harness.run { harness in
            let stored = try #require(try await harness.here.mirrorSettings(of: harness.project))
            let keyID = try #require(try FCMSettings(stored).privateKeyID)
            try await harness.google.registry.revokeServiceAccount(keyID: keyID)
            let reply = try await harness.operate(
                #"{"operation":"create","notification_key_name":"kim","registration_ids":["\#(token(1))"]}"#)
            #expect(reply.status == .badGateway)
            let words = try #require(reply.json?["error"]?.string)
            #expect(words.hasPrefix("Google refused the mirror's service account"))
            #expect(words.contains("its token endpoint refused it"))
            #expect(try await harness.groupHere("kim") == nil)
        }
    }
}
