import Foundation
import Hummingbird
import HummingbirdTesting
import Registry
import TestBackends
import Testing

/// A token belongs to the sender that registered it: another project's send to it is
/// `MismatchSenderId` / `SENDER_ID_MISMATCH`, as FCM answers, not `NotRegistered`.
@Suite("Sender id mismatch", .onEveryBackend)
struct SenderMismatchTests {
    /// The fixture's project, and token 50 registered only by another project.
    private func fixture() async throws -> Fixture {
        let fixture = try await Fixture.make()
        let (other, _) = try await fixture.registry.createProject(projectId: "other-app", senderId: "999999999999")
        _ = try await fixture.registry.registerToken(token(50), in: other)
        _ = try await fixture.registry.registerToken(token(1), in: fixture.project)
        return fixture
    }

    @Test("Legacy: the result of another sender's token is MismatchSenderId; a never-seen one stays NotRegistered")
    func legacy() async throws {
        try await fixture().test { client in
            let reply = try await client.call(
                .post, "/fcm/send",
                body: #"{"registration_ids":["\#(token(1))","\#(token(50))","\#(token(51))"],"data":{"a":"b"}}"#)
            #expect(reply.status == .ok)
            let results = try #require(reply.json?["results"]?.array)
            #expect(results[0]["message_id"] != nil)
            #expect(results[1] == ["error": "MismatchSenderId"])
            #expect(results[2] == ["error": "NotRegistered"])
            #expect(reply.json?["failure"] == 2)
        }
    }

    @Test("v1: 403 PERMISSION_DENIED with FcmError SENDER_ID_MISMATCH, the SDKs' SenderIdMismatchError")
    func v1() async throws {
        try await fixture().test { client in
            let reply = try await client.call(
                .post, "/v1/projects/test-app/messages:send", body: #"{"message":{"token":"\#(token(50))"}}"#)
            #expect(reply.status == .forbidden)
            #expect(reply.json?["error"]?["status"] == "PERMISSION_DENIED")
            #expect(reply.json?["error"]?["message"] == "SenderId mismatch")
            let details = try #require(reply.json?["error"]?["details"]?.array)
            #expect(details.contains { $0["errorCode"] == "SENDER_ID_MISMATCH" })
        }
    }

    @Test("XMPP validation nacks SENDER_ID_MISMATCH")
    func xmpp() async throws {
        try await fixture().test { client in
            let reply = try await client.call(
                .post, "/api/messages:validate",
                body: #"{"protocol":"xmpp","message":{"to":"\#(token(50))","message_id":"m1","data":{"a":"b"}}}"#)
            #expect(reply.json?["message_type"] == "nack")
            #expect(reply.json?["error"] == "SENDER_ID_MISMATCH")
        }
    }

    @Test("A token this project knows, even unregistered, is its own: NotRegistered")
    func ownUnregistered() async throws {
        let fixture = try await fixture()
        _ = try await fixture.registry.registerToken(token(50), in: fixture.project)
        _ = try await fixture.registry.unregisterToken(token(50), in: fixture.project)
        try await fixture.test { client in
            let reply = try await client.call(
                .post, "/fcm/send", body: #"{"registration_ids":["\#(token(50))"],"data":{"a":"b"}}"#)
            #expect(reply.json?["results"]?.array?.first == ["error": "NotRegistered"])
        }
    }
}
