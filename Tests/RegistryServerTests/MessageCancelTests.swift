import FCMRelay
import Foundation
import HTTPTypes
import Registry
import TestBackends
import Testing

/// `POST /api/messages/{id}:cancel` end to end: a fan-out sent by mistake stops, its unsent
/// recipients are counted and listed as cancelled, and nothing more of it goes out.
@Suite(.onEveryBackend) struct MessageCancelTests {
    @Test func aFanOutWaitingOnFCMIsCancelledAndNeverSent() async throws {
        try await RelayHarness.run { harness in
            let tokens = [token(1), token(2), token(3)]
            try await harness.registerUpstream(tokens)
            try await harness.subscribe(tokens, to: "news")
            // Nothing listens on port 1: the message waits, every recipient pending.
            try await harness.relay.setRelay(
                projectId: "relay-app",
                try FCMSettings(serviceAccountJSON: harness.serviceAccount, upstream: "http://127.0.0.1:1").stored)
            try await Task.sleep(for: .milliseconds(1200))  // the relay settings are read once a second
            #expect(try await harness.client.call(.post, "/fcm/send", body: #"{"to":"/topics/news"}"#).status == .ok)
            let id = try await harness.newestMessageID()

            let cancelled = try await harness.client.call(.post, "/api/messages/\(id):cancel")
            #expect(cancelled.status == .ok)
            #expect(cancelled.json?["id"] == .string(id))
            #expect(cancelled.json?["delivery"] == ["pending": 0, "delivered": 0, "failed": 0, "cancelled": 3])
            let shown = try await harness.client.call(.get, "/api/messages/\(id)")
            #expect(shown.json?["delivery"] == cancelled.json?["delivery"])
            let listed = try await harness.client.call(.get, "/api/messages/\(id)/deliveries?state=cancelled")
            #expect(listed.json?["deliveries"]?.array?.compactMap { $0["token"]?.string }.sorted() == tokens.sorted())
            let pending = try await harness.client.call(.get, "/api/messages/\(id)/deliveries?state=pending")
            #expect(pending.json?["deliveries"]?.array?.isEmpty == true)
            let audited = try await harness.client.call(.get, "/api/audit?action=message.cancelled")
            #expect(audited.json?["entries"]?.array?.map { $0["target"] } == [.string(id)])

            // Once FCM is back, nothing of the cancelled message reaches it.
            try await harness.relay.setRelay(
                projectId: "relay-app",
                try FCMSettings(serviceAccountJSON: harness.serviceAccount, upstream: harness.upstreamURL).stored)
            try await Task.sleep(for: .milliseconds(1500))
            #expect(try await harness.deliveredTokens().isEmpty)
            #expect(try await harness.relay.relayStatus(in: harness.project)?.pending == 0)
        }
    }

    @Test func aFinishedMessageIsAConflictAndAnUnknownOneIsNotFound() async throws {
        try await RelayHarness.run { harness in
            let tokens = [token(1), token(2)]
            try await harness.registerUpstream(tokens)
            try await harness.subscribe(tokens, to: "news")
            #expect(try await harness.client.call(.post, "/fcm/send", body: #"{"to":"/topics/news"}"#).status == .ok)
            let id = try await harness.newestMessageID()
            #expect(try await harness.settled(id) == DeliveryCounts(pending: 0, delivered: 2, failed: 0))

            let late = try await harness.client.call(.post, "/api/messages/\(id):cancel")
            #expect(late.status == .conflict)
            #expect(late.json?["error"]?["code"] == "failed_precondition")
            let shown = try await harness.client.call(.get, "/api/messages/\(id)")
            #expect(shown.json?["delivery"] == ["pending": 0, "delivered": 2, "failed": 0, "cancelled": 0])

            let unknown = try await harness.client.call(.post, "/api/messages/no-such-message:cancel")
            #expect(unknown.status == .notFound)
            let audited = try await harness.client.call(.get, "/api/audit?action=message.cancelled")
            #expect(audited.json?["entries"] == [])
        }
    }
}
