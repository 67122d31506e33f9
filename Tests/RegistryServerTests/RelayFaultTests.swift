import Delivery
import FCMRelay
import Foundation
import HTTPTypes
import Registry
import Synchronization
import TestBackends
import Testing

/// The relay against an FCM that misbehaves as real upstreams do, over HTTP/2 and TLS: a stream
/// it never answers, an HTML error page, an access token it stops taking, a quota that closes.
/// The sends go to a scripted `TestHTTP2Server`; the emulator still grants the access tokens.
@Suite(.onEveryBackend, .enabled(if: ServeProcess.available, "needs the built fcm-registry"), .timeLimit(.minutes(5)))
struct RelayFaultTests {
    static let delivered = Array(#"{"name":"projects/test-app/messages/1"}"#.utf8)

    /// A stalled stream (the upstream never answers it) is reset once the rest of its page is
    /// answered and tried again at once: the message settles long before the request timeout
    /// (a minute here), which is what one such stream used to cost its whole page.
    @Test func aStalledRequestIsTriedAgainWithoutHoldingUpItsMessage() async throws {
        var options = RelayHarness.testOptions
        options.requestTimeout = .seconds(60)
        try await withScriptedFCM(options: options) { token, seen in
            token == "t-7" && seen == 1 ? nil : TestHTTP2Server.Reply(status: 200, body: Self.delivered)
        } _: { harness, script in
            let tokens = (1...100).map { "t-\($0)" }
            try await harness.subscribe(tokens, to: "news")
            _ = try await harness.client.call(.post, "/fcm/send", body: #"{"to":"/topics/news","data":{"k":"v"}}"#)
            let counts = try await harness.settled(try await harness.newestMessageID(), within: 30)
            #expect(counts == DeliveryCounts(pending: 0, delivered: 100, failed: 0))
            #expect(script.requests(for: "t-7") == 2)
        }
    }

    /// A 404 that is not FCM's (no `FcmError` detail: a proxy's page, a wrong `--upstream`) says
    /// nothing about the token: nothing is pruned, and the project's last error says what came.
    @Test func anHTMLNotFoundPrunesNothing() async throws {
        let page = Array("<html><body><h1>404 Not Found</h1></body></html>".utf8)
        try await withScriptedFCM { _, _ in TestHTTP2Server.Reply(status: 404, body: page) } _: { harness, _ in
            let tokens = (1...10).map { "t-\($0)" }
            try await harness.subscribe(tokens, to: "news")
            _ = try await harness.client.call(.post, "/fcm/send", body: #"{"to":"/topics/news","data":{"k":"v"}}"#)
            let counts = try await harness.settled(try await harness.newestMessageID(), within: 30)
            #expect(counts.delivered == 0 && counts.pending == 0)
            let status = try #require(try await harness.relay.relayStatus(in: harness.project))
            #expect(status.lastError == "HTTP_404")
            #expect(status.pruned == 0)
            let subscribers = try await harness.client.call(.get, "/api/topics/news")
            #expect(subscribers.json?["subscriberCount"] == 10)
        }
    }

    /// A 401 for our access token (revoked, or the key rotated) fetches a new token once and
    /// sends the refused requests again: every recipient is delivered.
    @Test func aRefusedAccessTokenIsRenewedAndTheSendsGoAgain() async throws {
        let unauthenticated = Array(
            #"{"error":{"code":401,"message":"Request had invalid authentication credentials.","status":"UNAUTHENTICATED"}}"#
                .utf8)
        try await withScriptedFCM { _, _ in nil } _: { harness, script in
            script.answer { _, _, total in
                total <= 5
                    ? TestHTTP2Server.Reply(status: 401, body: unauthenticated)
                    : TestHTTP2Server.Reply(status: 200, body: Self.delivered)
            }
            let tokens = (1...40).map { "t-\($0)" }
            try await harness.subscribe(tokens, to: "news")
            _ = try await harness.client.call(.post, "/fcm/send", body: #"{"to":"/topics/news","data":{"k":"v"}}"#)
            let counts = try await harness.settled(try await harness.newestMessageID(), within: 30)
            #expect(counts == DeliveryCounts(pending: 0, delivered: 40, failed: 0))
        }
    }

    /// The first 429 stops every request of the project not started yet; the pause honours
    /// `Retry-After`, and after it one request goes first: while the quota stays closed, what
    /// reaches FCM is what was already in flight and one probe per pause, not a page.
    @Test func aClosedQuotaCostsOneRequestPerPauseNotAPage() async throws {
        var options = RelayHarness.testOptions
        options.concurrency = 20
        options.maximumAttempts = 5
        let quota = "QUOTA_EXCEEDED"
        let refusal = Array(
            #"{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"\#(quota)"}]}}"#
                .utf8)
        let window = options.concurrency
        try await withScriptedFCM(options: options) { _, _ in nil } _: { harness, script in
            // Closed from the first request for 2.5 s: two pauses of a second, then open.
            let opened = Mutex<ContinuousClock.Instant?>(nil)
            let closedRequests = Atomic<Int>(0)
            script.answer { _, _, _ in
                let now = ContinuousClock.now
                let open = opened.withLock { opened in
                    if opened == nil { opened = now + .milliseconds(2500) }
                    return now >= opened!
                }
                if open { return TestHTTP2Server.Reply(status: 200, body: Self.delivered) }
                closedRequests.add(1, ordering: .relaxed)
                return TestHTTP2Server.Reply(status: 429, retryAfter: 1, body: refusal)
            }
            let tokens = (1...300).map { "t-\($0)" }
            try await harness.subscribe(tokens, to: "news")
            _ = try await harness.client.call(.post, "/fcm/send", body: #"{"to":"/topics/news","data":{"k":"v"}}"#)
            let counts = try await harness.settled(try await harness.newestMessageID(), within: 60)
            #expect(counts == DeliveryCounts(pending: 0, delivered: 300, failed: 0))
            // The first window in flight, then a probe per pause (a third for a pause that ends
            // just as the quota opens).
            let refused = closedRequests.load(ordering: .relaxed)
            #expect(refused <= window + 3, "\(refused) requests reached FCM while its quota was closed")
        }
    }

    // MARK: - The scripted FCM

    /// Runs `body` with a relay whose sends go to a scripted HTTP/2 server over TLS.
    func withScriptedFCM(
        options: RelayOptions = RelayHarness.testOptions,
        _ reply: @escaping @Sendable (_ token: String, _ seen: Int) -> TestHTTP2Server.Reply?,
        _ body: @escaping @Sendable (RelayHarness, UpstreamScript) async throws -> Void
    ) async throws {
        let certificates = try TestCertificates()
        let script = UpstreamScript { token, seen, _ in reply(token, seen) }
        let server = try await TestHTTP2Server(certificates: certificates.files) { script.reply(to: $0) }
        var options = options
        options.caFile = certificates.files.caCertificate
        var failure: (any Error)?
        do {
            try await RelayHarness.run(options: options, sendingTo: "https://127.0.0.1:\(server.port)") { harness in
                try await body(harness, script)
            }
        } catch {
            failure = error
        }
        await server.stop()
        withExtendedLifetime(certificates) {}
        if let failure { throw failure }
    }
}

/// What the scripted FCM answers, and what it received: by the token of each request, how many
/// times that token was seen (this one included), and how many requests came in all.
final class UpstreamScript: Sendable {
    typealias Rule = @Sendable (_ token: String, _ seen: Int, _ total: Int) -> TestHTTP2Server.Reply?

    private struct State {
        var rule: Rule
        var seen: [String: Int] = [:]
        var total = 0
    }

    private let state: Mutex<State>

    init(_ rule: @escaping Rule) {
        state = Mutex(State(rule: rule))
    }

    /// Answers from now on by `rule`.
    func answer(_ rule: @escaping Rule) {
        state.withLock { $0.rule = rule }
    }

    func requests(for token: String) -> Int {
        state.withLock { $0.seen[token] ?? 0 }
    }

    func reply(to body: [UInt8]) -> TestHTTP2Server.Reply? {
        let message = (try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any])?["message"]
        let token = (message as? [String: Any])?["token"] as? String ?? ""
        let (rule, seen, total) = state.withLock { state in
            state.seen[token, default: 0] += 1
            state.total += 1
            return (state.rule, state.seen[token]!, state.total)
        }
        return rule(token, seen, total)
    }
}
