import Delivery
import FCMRelay
import Foundation
import HTTPTypes
import Registry
import TestBackends
import Testing

/// The relay end to end: a relaying registry delivers through FCM HTTP v1 to an emulator registry
/// playing FCM, which answers with FCM's own bodies and, on purpose, its faults.
@Suite(.onEveryBackend) struct RelayTests {
    @Test func aTopicSendReachesEveryDeviceOnceAndAnswersAtOnce() async throws {
        try await RelayHarness.run { harness in
            let tokens = (1...30).map(token)
            try await harness.registerUpstream(tokens)
            try await harness.subscribe(tokens, to: "news")
            let reply = try await harness.client.call(
                .post, "/fcm/send", body: #"{"to":"/topics/news","data":{"k":"v"},"priority":"high"}"#)
            #expect(reply.status == .ok)
            let id = try #require(reply.json?["message_id"].flatMap { if case .number(let n) = $0 { n } else { nil } })
            let counts = try await harness.settled(String(Int64(id)))
            #expect(counts == DeliveryCounts(pending: 0, delivered: 30, failed: 0))
            // One v1 message per device, each named by its token, none twice.
            let received = try await harness.deliveredTokens()
            #expect(received.sorted() == tokens.sorted())
            let first = try #require(try await harness.delivered().first)
            #expect(first["data"] == ["k": "v"])
            #expect(first["platform"]?["android"] == ["priority": "HIGH"])
            let listed = try await harness.client.call(
                .get, "/api/messages/\(Int64(id))/deliveries?state=delivered&pageSize=1000")
            #expect(listed.json?["deliveries"]?.array?.count == 30)
        }
    }

    @Test func unregisteredIsAnsweredAndPrunedThroughTheFeed() async throws {
        try await RelayHarness.run { harness in
            let (alive, dead) = (token(1), token(2))
            try await harness.registerUpstream([alive])  // FCM never knew `dead`
            try await harness.subscribe([alive, dead], to: "news")
            let reply = try await harness.client.call(
                .post, "/v1/projects/relay-app/messages:send", body: #"{"message":{"token":"\#(dead)"}}"#)
            #expect(reply.status == .notFound)
            #expect(reply.json?["error"]?["details"]?.array?.first?["errorCode"] == "UNREGISTERED")
            // Unregistered, so it left its topic: the audience (kept by the change feed) no longer has it.
            let token = try await harness.client.call(.get, "/api/tokens/\(dead)")
            #expect(token.json?["state"] == "unregistered")
            let audience = try await harness.client.call(
                .post, "/api/audiences:resolve", body: #"{"topic":"news"}"#)
            #expect(audience.json?["tokens"] == [.string(alive)])
            let relay = try await harness.client.call(.get, "/api/relay")
            let shown = try #require(relay.json?["projects"]?.array?.first)
            #expect(shown["pruned"] == 1)
            // The last error, with when it was recorded (RFC 3339).
            #expect(shown["lastError"] == "UNREGISTERED")
            let errorAt = try #require(shown["lastErrorAt"]?.string)
            #expect(errorAt.wholeMatch(of: #/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)/#) != nil, "\(errorAt)")
            // The channel and its settings that may be shown; never the key.
            #expect(shown["channel"] == "fcm-v1")
            #expect(shown["settings"]?["firebaseProjectId"] == "test-app")
            #expect(shown["settings"]?["upstream"] == .string(harness.upstreamURL))
            #expect(shown["firebaseProjectId"] == "test-app")
            #expect(shown["settings"]?["privateKey"] == nil)
            #expect(!"\(shown)".contains("PRIVATE KEY"))
            // A relaying project says its messages leave for devices.
            #expect(try await harness.client.call(.get, "/api/project").json?["delivery"] == "relayed")
        }
    }

    @Test func senderMismatchAndInvalidArgumentFailEachTokenWithoutRetry() async throws {
        try await RelayHarness.run { harness in
            let tokens = [token(1), token(2), token(3)]
            try await harness.registerUpstream(tokens)
            try await harness.subscribe(tokens, to: "news")
            try harness.fault(.senderIDMismatch, times: nil, token: tokens[1])
            try harness.fault(.invalidArgument, times: nil, token: tokens[2])
            let reply = try await harness.client.call(
                .post, "/fcm/send", body: #"{"registration_ids":\#(jsonArray(tokens)),"data":{"a":"b"}}"#)
            #expect(reply.json?["success"] == 1)
            #expect(reply.json?["failure"] == 2)
            let results = try #require(reply.json?["results"]?.array)
            #expect(results[1] == ["error": "MismatchSenderId"])
            #expect(results[2] == ["error": "InvalidRegistration"])
            let id = try await harness.newestMessageID()
            let failed = try await harness.client.call(
                .get, "/api/messages/\(id.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)/deliveries?state=failed")
            let entries = try #require(failed.json?["deliveries"]?.array)
            #expect(Set(entries.compactMap { $0["error"]?.string }) == ["SENDER_ID_MISMATCH", "INVALID_ARGUMENT"])
            #expect(entries.allSatisfy { $0["attempts"] == 1 })
            // A mismatched sender is pruned; a bad argument is not the token's death.
            #expect(try await harness.relay.token(tokens[1], in: harness.project)?.state == .unregistered)
            #expect(try await harness.relay.token(tokens[2], in: harness.project)?.state == .registered)
        }
    }

    @Test func unavailableIsRetriedHonouringRetryAfter() async throws {
        try await RelayHarness.run { harness in
            let device = token(1)
            try await harness.registerUpstream([device])
            try harness.fault(.unavailable, times: 2, retryAfter: 1, token: device)
            let started = ContinuousClock.now
            let reply = try await harness.client.call(
                .post, "/v1/projects/relay-app/messages:send", body: #"{"message":{"token":"\#(device)"}}"#)
            #expect(reply.status == .ok)
            // Two waits of at least the Retry-After second before the third attempt went through.
            #expect(ContinuousClock.now - started >= .seconds(2))
            let delivered = try await harness.client.call(
                .get,
                "/api/messages/\(try await harness.newestMessageID().addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)/deliveries?state=delivered"
            )
            #expect(delivered.json?["deliveries"]?.array?.first?["attempts"] == 3)
            #expect(try await harness.deliveredTokens() == [device])
        }
    }

    @Test func internalErrorsFailAfterTheLastAttempt() async throws {
        try await RelayHarness.run { harness in
            let device = token(1)
            try await harness.registerUpstream([device])
            try await harness.subscribe([device], to: "news")
            try harness.fault(.internal, times: nil, retryAfter: 0, token: device)
            let reply = try await harness.client.call(
                .post, "/fcm/send", body: #"{"to":"\#(device)","data":{"a":"b"}}"#)
            #expect(reply.json?["results"]?.array?.first == ["error": "InternalServerError"])
            let id = try await harness.newestMessageID()
            let counts = try await harness.settled(id)
            #expect(counts == DeliveryCounts(pending: 0, delivered: 0, failed: 1))
            let failed = try await harness.client.call(
                .get, "/api/messages/\(id.addingPercentEncoding(withAllowedCharacters: .alphanumerics)!)/deliveries")
            #expect(failed.json?["deliveries"]?.array?.first?["attempts"] == 3)
            #expect(failed.json?["deliveries"]?.array?.first?["error"] == "INTERNAL")
            // Not the token's fault: it stays registered.
            #expect(try await harness.relay.token(device, in: harness.project)?.state == .registered)
        }
    }

    @Test func quotaExceededPausesTheWholeProject() async throws {
        try await RelayHarness.run { harness in
            let tokens = [token(1), token(2)]
            try await harness.registerUpstream(tokens)
            try await harness.subscribe(tokens, to: "news")
            try harness.fault(.quotaExceeded, times: 1, retryAfter: 2, token: nil)
            let reply = try await harness.client.call(.post, "/fcm/send", body: #"{"to":"/topics/news"}"#)
            #expect(reply.status == .ok)
            try await waitUntil {
                try await harness.relay.relayStatus(in: harness.project)?.pausedUntil != nil
            }
            let status = try #require(try await harness.relay.relayStatus(in: harness.project))
            #expect(status.lastError == "QUOTA_EXCEEDED")
            // While paused, nothing more goes out; after the pause, both devices get the message.
            #expect(try await harness.deliveredTokens().count <= 1)
            let counts = try await harness.settled(try await harness.newestMessageID())
            #expect(counts.delivered == 2)
            #expect(try await harness.deliveredTokens().sorted() == tokens.sorted())
        }
    }

    @Test func aTokenOnlyFCMKnowsIsSentToAndThenRegistered() async throws {
        try await RelayHarness.run { harness in
            let device = token(7)
            try await harness.registerUpstream([device])
            #expect(try await harness.relay.token(device, in: harness.project) == nil)
            let reply = try await harness.client.call(
                .post, "/v1/projects/relay-app/messages:send",
                body: #"{"message":{"token":"\#(device)","notification":{"title":"t"}}}"#)
            #expect(reply.status == .ok)
            #expect(try await harness.relay.token(device, in: harness.project)?.state == .registered)
            #expect(try await harness.delivered().first?["notification"] == ["title": "t"])
        }
    }

    @Test func aDeviceGroupAnswersWhichMembersFCMRefused() async throws {
        try await RelayHarness.run { harness in
            let members = [token(1), token(2), token(3)]
            try await harness.registerUpstream([members[0], members[2]])
            let key = try await harness.client.createGroup("family", members)
            let reply = try await harness.client.call(
                .post, "/fcm/send", body: #"{"to":"\#(key)","data":{"a":"b"}}"#)
            #expect(reply.json == ["success": 2, "failure": 1, "failed_registration_ids": [.string(members[1])]])
        }
    }

    @Test func pastTheAnswerTimeoutASendIsAcceptedAndDeliveryGoesOn() async throws {
        var options = RelayHarness.testOptions
        options.answerTimeout = .milliseconds(300)
        try await RelayHarness.run(options: options) { harness in
            let device = token(1)
            try await harness.registerUpstream([device])
            try harness.fault(.unavailable, times: 1, retryAfter: 5, token: device)
            let reply = try await harness.client.call(
                .post, "/v1/projects/relay-app/messages:send", body: #"{"message":{"token":"\#(device)"}}"#)
            #expect(reply.status == .ok)
            // Answered before FCM's last word: the device is still waiting out its 5 s Retry-After.
            let id = try await harness.newestMessageID()
            let answered = try #require(try await harness.relay.delivery(ofMessage: id, in: harness.project))
            #expect(answered.pending == 1)
            #expect(answered.delivered == 0)
            let counts = try await harness.settled(id)
            #expect(counts.delivered == 1)
        }
    }

    @Test func aFullOutboxRefusesSendsAndWritesNothing() async throws {
        var options = RelayHarness.testOptions
        options.outboxMessages = 1
        try await RelayHarness.run(options: options) { harness in
            let device = token(1)
            try await harness.registerUpstream([device])
            try await harness.subscribe([device], to: "news")
            // The first message waits out a long quota pause, so it stays in the outbox.
            try harness.fault(.quotaExceeded, times: 1, retryAfter: 600, token: nil)
            #expect(try await harness.client.call(.post, "/fcm/send", body: #"{"to":"/topics/news"}"#).status == .ok)
            let legacy = try await harness.client.call(.post, "/fcm/send", body: #"{"to":"/topics/news"}"#)
            #expect(legacy.status == .serviceUnavailable)
            #expect(legacy.json == ["error": "Unavailable"])
            #expect(legacy.headers[.retryAfter] == "10")
            let v1 = try await harness.client.call(
                .post, "/v1/projects/relay-app/messages:send", body: #"{"message":{"topic":"news"}}"#)
            #expect(v1.status == .serviceUnavailable)
            #expect(v1.json?["error"]?["status"] == "UNAVAILABLE")
            let log = try await harness.relay.loggedMessages(.all, in: harness.project, after: nil, limit: 10)
            #expect(log.items.count == 1)
        }
    }

    @Test func whileFCMCannotBeReachedNothingIsSpentAndDeliveryResumesAfter() async throws {
        try await RelayHarness.run { harness in
            let tokens = [token(1), token(2), token(3)]
            try await harness.registerUpstream(tokens)
            try await harness.subscribe(tokens, to: "news")
            // Nothing listens on port 1: every request fails to connect.
            try await harness.relay.setRelay(
                projectId: "relay-app", try FCMSettings(serviceAccountJSON: harness.serviceAccount, upstream: "http://127.0.0.1:1").stored)
            try await Task.sleep(for: .milliseconds(1200))  // the relay settings are read once a second
            #expect(try await harness.client.call(.post, "/fcm/send", body: #"{"to":"/topics/news"}"#).status == .ok)
            let id = try await harness.newestMessageID()
            try await Task.sleep(for: .milliseconds(1500))
            // An outage is no recipient's failure: nothing is recorded, everyone is still pending.
            #expect(try await harness.relay.delivery(ofMessage: id, in: harness.project)?.pending == 3)
            let pending = try await harness.client.call(.get, "/api/messages/\(id)/deliveries?state=pending")
            #expect(pending.json?["deliveries"]?.array?.map { $0["attempts"] } == [0, 0, 0])
            try await harness.relay.setRelay(
                projectId: "relay-app", try FCMSettings(serviceAccountJSON: harness.serviceAccount, upstream: harness.upstreamURL).stored)
            let counts = try await harness.settled(id)
            #expect(counts == DeliveryCounts(pending: 0, delivered: 3, failed: 0))
        }
    }

    /// Settings kept for a channel this server does not deliver through (written by a newer
    /// version, say) reach nobody: nothing is sent, recorded or pruned, and once the project's
    /// settings are FCM's again its messages go.
    @Test func settingsOfAnotherChannelSendNothingUntilTheyAreFCMsAgain() async throws {
        try await RelayHarness.run { harness in
            let tokens = [token(1), token(2)]
            try await harness.registerUpstream(tokens)
            try await harness.subscribe(tokens, to: "news")
            let fcm = try #require(try await harness.relay.relaySettings(of: harness.project))
            try await harness.relay.setRelay(
                projectId: "relay-app",
                ChannelSettings(channel: "web-push", settings: [:], secrets: ["vapidKey": .string("k")]))
            try await Task.sleep(for: .milliseconds(1200))  // the relay settings are read once a second
            #expect(try await harness.client.call(.post, "/fcm/send", body: #"{"to":"/topics/news"}"#).status == .ok)
            let id = try await harness.newestMessageID()
            try await Task.sleep(for: .milliseconds(1500))
            #expect(try await harness.relay.delivery(ofMessage: id, in: harness.project)?.pending == 2)
            let shown = try await harness.client.call(.get, "/api/relay").json?["projects"]?.array?.first
            #expect(shown?["channel"] == "web-push")
            #expect(shown?["settings"] == [:])
            #expect(shown?["firebaseProjectId"] == nil)
            try await harness.relay.setRelay(projectId: "relay-app", fcm)
            #expect(try await harness.settled(id) == DeliveryCounts(pending: 0, delivered: 2, failed: 0))
        }
    }

    @Test func aDirectSendWaitsThroughAQuotaPauseForItsAnswer() async throws {
        try await RelayHarness.run { harness in
            // FCM's quota is spent for two seconds, and then FCM does not know the token.
            try harness.fault(.quotaExceeded, times: 1, retryAfter: 2, token: nil)
            let reply = try await harness.client.call(
                .post, "/fcm/send", body: #"{"to":"\#(token(9))","data":{"q":"2"}}"#)
            #expect(reply.json?["results"] == [["error": "NotRegistered"]])
        }
    }

    /// One project's fan-outs never take a whole server: while project A's four topic sends
    /// crawl at its rate, A's send to one token is answered with FCM's verdict, and project B's
    /// topic send is delivered, each long before A's fan-outs end.
    @Test func oneProjectsFanOutsLeaveRoomForDirectSendsAndOtherProjects() async throws {
        var options = RelayHarness.testOptions
        options.ratePerSecond = 20
        try await RelayHarness.run(options: options) { harness in
            let tokens = (1...100).map(token)
            try await harness.registerUpstream(tokens + ["b-1", "b-2", "b-3"])
            try await harness.subscribe(tokens, to: "news")
            let (other, key) = try await harness.relay.createProject(projectId: "other-app", senderId: "333000333000")
            try await harness.relay.setRelay(
                projectId: "other-app", try FCMSettings(serviceAccountJSON: harness.serviceAccount, upstream: harness.upstreamURL).stored)
            let b = Fixture.Client(client: harness.client.client, key: key)
            _ = try await b.call(.post, "/iid/v1:batchAdd", body: #"{"to":"/topics/b","registration_tokens":["b-1","b-2","b-3"]}"#)
            // A server learns that a project relays within a second (its settings are cached).
            try await Task.sleep(for: .milliseconds(1100))
            for n in 0..<4 {
                _ = try await harness.client.call(.post, "/fcm/send", body: #"{"to":"/topics/news","data":{"n":"\#(n)"}}"#)
            }
            let fanOut = try await harness.newestMessageID()
            // Four fan-outs of 100 at 20 a second: about 20 s in all. A direct send goes ahead.
            let direct = try await harness.client.call(.post, "/fcm/send", body: #"{"to":"\#(token(1))","data":{"d":"1"}}"#)
            #expect(direct.json?["success"] == 1)
            let directID = try await harness.newestMessageID()
            #expect(try await harness.relay.delivery(ofMessage: directID, in: harness.project)?.delivered == 1)

            _ = try await b.call(.post, "/fcm/send", body: #"{"to":"/topics/b","data":{"b":"1"}}"#)
            let sentB = try #require(try await harness.relay.loggedMessages(.all, in: other, after: nil, limit: 1).items.first)
            try await waitUntil(10) {
                try await harness.relay.delivery(ofMessage: sentB.id, in: other)?.delivered == 3
            }
            // A's fan-outs are still going.
            #expect(try await harness.relay.delivery(ofMessage: fanOut, in: harness.project)?.pending ?? 0 > 0)
        }
    }
}
