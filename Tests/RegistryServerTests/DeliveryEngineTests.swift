import Delivery
import Foundation
import HTTPTypes
import Registry
import Synchronization
import TestBackends
import Testing

/// The delivery engine over a scripted channel, on every store: each class of answer a channel
/// can give, and outcomes recorded while the rest of their round is still out.
@Suite(.onEveryBackend) struct DeliveryEngineTests {
    @Test func everyClassOfAnswerEndsItsRecipientAsTheEngineRules() async throws {
        let channel = ScriptedChannel()
        // Each recipient's answers, one per attempt; delivered once they run out.
        let script: [(ChannelAnswer, expect: DeliveryState, error: String?, attempts: Int)] = [
            (.answered(.delivered), .delivered, nil, 1),
            (.answered(.gone("UNREGISTERED")), .failed, "UNREGISTERED", 1),
            (.answered(.failed("INVALID_ARGUMENT")), .failed, "INVALID_ARGUMENT", 1),
            (.answered(.retryAfter("UNAVAILABLE", seconds: 0)), .delivered, nil, 2),
            // Refused by the quota, or held back by it: no attempt spent.
            (.answered(.slowDown("QUOTA_EXCEEDED", seconds: 1)), .delivered, nil, 1),
            (.notSent, .delivered, nil, 1),
            (.stalled, .delivered, nil, 2),
            (.unanswered, .delivered, nil, 2),
        ]
        for (n, entry) in script.enumerated() { channel.script(token(n + 1), [entry.0]) }
        // Refused for now at every attempt: failed once the attempts are spent (three in tests).
        // (A round no one answers at all is an outage, which spends no attempt.)
        let busy = ChannelAnswer.answered(.retryAfter("UNAVAILABLE", seconds: 0))
        channel.script(token(9), [busy, busy, busy])
        try await RelayHarness.run(channel: channel) { harness in
            let tokens = (1...9).map(token)
            try await harness.subscribe(tokens, to: "news")
            let reply = try await harness.client.call(.post, "/fcm/send", body: #"{"to":"/topics/news","data":{"k":"v"}}"#)
            #expect(reply.status == .ok)
            let id = try await harness.newestMessageID()
            let counts = try await harness.settled(id, within: 30)
            #expect(counts == DeliveryCounts(pending: 0, delivered: 6, failed: 3))
            var outcomes: [String: DeliveryEntry] = [:]
            for state in [DeliveryState.delivered, .failed] {
                let page = try #require(
                    try await harness.relay.deliveries(
                        ofMessage: id, state: state, in: harness.project, page: PageRequest(size: 100, token: nil)))
                for entry in page.items { outcomes[entry.token] = entry }
            }
            for (n, entry) in script.enumerated() {
                let outcome = try #require(outcomes[token(n + 1)], "\(entry.0)")
                #expect(outcome.state == entry.expect, "\(entry.0)")
                #expect(outcome.error == entry.error, "\(entry.0)")
                #expect(outcome.attempts == entry.attempts, "\(entry.0)")
            }
            #expect(outcomes[token(9)]?.state == .failed)
            #expect(outcomes[token(9)]?.error == "UNAVAILABLE")
            #expect(outcomes[token(9)]?.attempts == 3)
            // Only the pruned one left the registry.
            let pruned = try await harness.client.call(.get, "/api/tokens/\(token(2))")
            #expect(pruned.json?["state"] == "unregistered")
            let failed = try await harness.client.call(.get, "/api/tokens/\(token(3))")
            #expect(failed.json?["state"] == "registered")
        }
    }

    /// Pruning follows the verdict's type, never its words: a channel's own word for a gone token
    /// prunes it, and FCM's word in a plain failure prunes nothing. The stored error is the
    /// channel's word either way.
    @Test func aTokenIsPrunedByTheVerdictsTypeNotItsWords() async throws {
        let channel = ScriptedChannel()
        channel.script(token(1), [.answered(.gone("CARRIER_LOST"))])
        channel.script(token(2), [.answered(.failed("UNREGISTERED"))])
        try await RelayHarness.run(channel: channel) { harness in
            try await harness.subscribe([token(1), token(2)], to: "news")
            let reply = try await harness.client.call(.post, "/fcm/send", body: #"{"to":"/topics/news"}"#)
            #expect(reply.status == .ok)
            let id = try await harness.newestMessageID()
            #expect(try await harness.settled(id, within: 30) == DeliveryCounts(pending: 0, delivered: 0, failed: 2))
            let page = try #require(
                try await harness.relay.deliveries(
                    ofMessage: id, state: .failed, in: harness.project, page: PageRequest(size: 10, token: nil)))
            #expect(
                Set(page.items.map { "\($0.token) \($0.error ?? "")" })
                    == ["\(token(1)) CARRIER_LOST", "\(token(2)) UNREGISTERED"])
            // The prune follows the page's record: looked for until it is there.
            var gone = try await harness.client.call(.get, "/api/tokens/\(token(1))")
            for _ in 0..<100 where gone.json?["state"] != "unregistered" {
                try await Task.sleep(for: .milliseconds(50))
                gone = try await harness.client.call(.get, "/api/tokens/\(token(1))")
            }
            #expect(gone.json?["state"] == "unregistered")
            let failed = try await harness.client.call(.get, "/api/tokens/\(token(2))")
            #expect(failed.json?["state"] == "registered")
        }
    }

    @Test func outcomesAreRecordedWhileTheRestOfTheirRoundIsOut() async throws {
        let channel = ScriptedChannel()
        let tokens = (1...400).map(token)
        // The round's last 100 requests stay unanswered until the test lets them go.
        channel.holdRequests(from: 300)
        try await RelayHarness.run(channel: channel) { harness in
            try await harness.subscribe(tokens, to: "news")
            let reply = try await harness.client.call(.post, "/fcm/send", body: #"{"to":"/topics/news"}"#)
            #expect(reply.status == .ok)
            let id = try await harness.newestMessageID()
            // The 300 answered are recorded though their round has not ended.
            try await waitUntil(10) {
                try await harness.relay.delivery(ofMessage: id, in: harness.project)?.delivered == 300
            }
            #expect(channel.waiting == 100)
            channel.letGo()
            let counts = try await harness.settled(id)
            #expect(counts == DeliveryCounts(pending: 0, delivered: 400, failed: 0))
            #expect(channel.sends.values.allSatisfy { $0 == 1 })
            #expect(channel.sends.count == 400)
        }
    }
}

/// A channel that answers each token as scripted (delivered once its script runs out), and can
/// hold the answers of a round's last requests until told to let them go.
final class ScriptedChannel: DeliveryChannel {
    private struct State {
        var scripts: [String: [ChannelAnswer]] = [:]
        var holdFrom: Int?
        var sends: [String: Int] = [:]
        var waiting = 0
        var released = false
    }

    private let state = Mutex(State())
    private let release = AsyncStream<Void>.makeStream()

    func script(_ token: String, _ answers: [ChannelAnswer]) {
        state.withLock { $0.scripts[token] = answers }
    }

    /// Holds the answers of each round's requests from `index` on.
    func holdRequests(from index: Int) {
        state.withLock { $0.holdFrom = index }
    }

    /// Requests sent, by token.
    var sends: [String: Int] { state.withLock { $0.sends } }
    /// Requests whose answers are held back now.
    var waiting: Int { state.withLock { $0.waiting } }

    /// Answers what is held back, and holds nothing more.
    func letGo() {
        state.withLock { $0.released = true }
        release.continuation.finish()
    }

    func send(
        _ attempts: [DeliveryAttempt], of job: OutboxJob, with settings: ChannelSettings, gate: SendGate,
        answered: @escaping AnswerSink
    ) async {
        var later: [(Int, ChannelAnswer)] = []
        for (index, attempt) in attempts.enumerated() {
            let (answer, hold) = state.withLock { state -> (ChannelAnswer, Bool) in
                var answers = state.scripts[attempt.token] ?? []
                let answer = answers.isEmpty ? ChannelAnswer.answered(.delivered) : answers.removeFirst()
                state.scripts[attempt.token] = answers
                if answer != .notSent { state.sends[attempt.token, default: 0] += 1 }
                let hold = !state.released && index >= state.holdFrom ?? attempts.count
                if hold { state.waiting += 1 }
                return (answer, hold)
            }
            if case .answered(.slowDown(_, let seconds)) = answer { gate.quotaClosed(seconds) }
            if hold { later.append((index, answer)) } else { answered(index, answer) }
        }
        guard !later.isEmpty else { return }
        for await _ in release.stream {}
        state.withLock { $0.waiting = 0 }
        for (index, answer) in later { answered(index, answer) }
    }

    /// In FCM's place: the harness's project relays through `fcm-v1`.
    static let name = "fcm-v1"

    static func template(of message: AcceptedMessage) -> String {
        "{}"
    }

    func refusal(_ code: String, token: String) -> MessageProblem {
        .notRegistered(token)
    }

    let words = ChannelWords(
        unanswered: "UNAVAILABLE", quotaClosed: "QUOTA_EXCEEDED", deadlinePassed: "DEADLINE_EXCEEDED",
        gone: "UNREGISTERED")

    func shutdown() async {}
}
