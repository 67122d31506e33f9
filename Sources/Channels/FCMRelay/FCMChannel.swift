import Delivery
import FCMWire
import Foundation
import HTTP2FanOut
import Logging
import Outbound
import Registry
import Synchronization

/// FCM HTTP v1 as a delivery channel: one `messages:send` request per recipient, over HTTP/2 to an
/// `https` upstream (`HTTP2Upstream`, the fan-out of `HTTP2FanOut`), else through the general client; access tokens by the
/// JWT-bearer grant (`AccessTokenCache`); each answer read by FCM's words (`FCMAnswers`).
///
/// A 401 that is about our access token (not `THIRD_PARTY_AUTH_ERROR`, which is about the app's
/// APNs or web-push credentials) fetches a new token once, and the refused requests go again with
/// it. An answer that is not FCM's (no error detail: a proxy's page, a wrong `--upstream`) is
/// retried and logged at most once a minute per project.
public final class FCMChannel: DeliveryChannel {
    /// One request's answer, or the error that left it without one.
    typealias Answer = Result<UpstreamAnswer, any Error>

    private let options: RelayOptions
    private let logger: Logger
    private let client: UpstreamClient
    private let accessTokens: AccessTokenCache
    /// The HTTP/2 fan-out path, per `https` upstream.
    private let fanOuts = Mutex<[String: HTTP2Upstream]>([:])
    /// When each project's last fault was logged.
    private let faultsLogged = Mutex<[String: ContinuousClock.Instant]>([:])

    public init(options: RelayOptions, logger: Logger) throws {
        self.options = options
        self.logger = logger
        client = try UpstreamClient(options: options)
        accessTokens = AccessTokenCache(client: client)
    }

    public func send(
        _ attempts: [DeliveryAttempt], of job: OutboxJob, with stored: ChannelSettings, gate: SendGate,
        answered: @escaping AnswerSink
    ) async {
        guard !attempts.isEmpty else { return }
        let relay: FCMSettings
        do {
            relay = try FCMSettings(stored)
        } catch {
            // Settings this server cannot read (another channel's, a field missing) reach nobody:
            // the round waits like one without an answer, and the log says why.
            warnOnceAMinute(
                about: job.project, .unreadableSettings, "relay: the project's settings cannot be read; nothing is sent",
                ["project": "\(job.project)", "error": "\(error)"])
            for index in attempts.indices { answered(index, .unanswered) }
            return
        }
        // One access token for the round, not a look-up per request.
        let bearer: String
        do {
            bearer = try await accessTokens.token(for: job.project, settings: relay)
        } catch {
            if !(error is CancellationError) {
                warnOnceAMinute(
                    about: job.project, .noAccessToken, "relay: no access token from the token endpoint; nothing is sent",
                    ["project": "\(job.project)", "token_uri": "\(ConnectionFailure.escaped(relay.tokenURI))",
                     "error": "\(ConnectionFailure.words(for: error))"])
            }
            for index in attempts.indices { answered(index, .unanswered) }
            return
        }
        let round = RoundNotes()
        // An answer refusing our access token is held back: its request goes again with a new one.
        await post(attempts, of: job, with: relay, bearer: bearer, gate: gate) { [self] index, answer in
            if Self.isOurTokenRefused(answer) {
                round.refused.withLock { $0.append(index) }
            } else {
                answered(index, read(answer, of: job, notes: round))
            }
        }
        let refused = round.refused.withLock { $0.sorted() }
        if !refused.isEmpty {
            await accessTokens.drop(project: job.project, token: bearer)
            if let fresh = try? await accessTokens.token(for: job.project, settings: relay) {
                logger.notice(
                    "relay: FCM refused the access token; sending again with a new one",
                    metadata: ["project": "\(job.project)", "requests": "\(refused.count)"])
                await post(refused.map { attempts[$0] }, of: job, with: relay, bearer: fresh, gate: gate) {
                    [self] index, answer in answered(refused[index], read(answer, of: job, notes: round))
                }
            } else {
                // No new token (the token endpoint out of reach): the refusal was about our token,
                // not the recipients, who wait like any unanswered request.
                for index in refused { answered(index, .unanswered) }
            }
        }
        if let fault = round.upstreamFault.withLock({ $0 }) {
            reportUpstreamFault(fault, of: job.project, upstream: relay.upstream)
        }
        if let unreachable = round.unreachable.withLock({ $0 }) {
            warnOnceAMinute(
                about: job.project, .unreachable, "relay: cannot reach the upstream; retrying",
                ["project": "\(job.project)", "upstream": "\(ConnectionFailure.escaped(relay.upstream))",
                 "error": "\(unreachable)"])
        }
    }

    /// What a round learns beside its answers: the requests whose access token was refused, and
    /// the first answer that was not FCM's.
    private final class RoundNotes: Sendable {
        let refused = Mutex<[Int]>([])
        let upstreamFault = Mutex<String?>(nil)
        /// The first connection that failed, in plain words.
        let unreachable = Mutex<String?>(nil)
    }

    /// One answer in the engine's terms, read by FCM's words.
    private func read(_ answer: Answer, of job: OutboxJob, notes: RoundNotes) -> ChannelAnswer {
        switch answer {
        case .success(let answer) where (200..<300).contains(answer.status):
            return .answered(.delivered)
        case .success(let answer):
            if answer.errorCode == nil {
                notes.upstreamFault.withLock { fault in if fault == nil { fault = "HTTP \(answer.status)" } }
            }
            return .answered(
                FCMAnswers.verdict(status: answer.status, code: answer.errorCode, retryAfter: answer.retryAfter))
        case .failure(is NotSent):
            return .notSent
        case .failure(let error as Stalled):
            logger.debug("relay: a request stalled", metadata: ["message.id": "\(job.messageID)", "error": "\(error)"])
            return .stalled
        case .failure(is CancelledPage), .failure(is CancellationError), .failure(is NoAnswerInTime):
            return .unanswered
        case .failure(let error):
            notes.unreachable.withLock { first in if first == nil { first = ConnectionFailure.words(for: error) } }
            return .unanswered
        }
    }

    public static func template(of message: AcceptedMessage) -> String {
        V1Outgoing.template(message.message, via: message.via, now: message.receivedAt)
    }

    public static let name = FCMSettings.channel

    public var words: ChannelWords { FCMAnswers.words }

    public func refusal(_ code: String, token: String) -> MessageProblem {
        FCMAnswers.problem(for: code, token: token, retryAfter: nil)
    }

    public func shutdown() async {
        for fanOut in fanOuts.withLock({ Array($0.values) }) { await fanOut.shutdown() }
        try? await client.shutdown()
    }

    /// Whether an answer refuses our access token (and not the app's own APNs or web-push
    /// credentials, `THIRD_PARTY_AUTH_ERROR`).
    private static func isOurTokenRefused(_ answer: Answer) -> Bool {
        guard case .success(let answer) = answer, answer.status == 401 else { return false }
        return answer.errorCode != "THIRD_PARTY_AUTH_ERROR"
    }

    /// Posts one request per attempt, and tells `answered` each one's answer as it comes.
    private func post(
        _ attempts: [DeliveryAttempt], of job: OutboxJob, with relay: FCMSettings, bearer: String, gate: SendGate,
        answered: @escaping @Sendable (Int, Answer) -> Void
    ) async {
        guard !attempts.isEmpty else { return }
        if let fanOut = fanOut(to: relay.upstream) {
            return await post(attempts, of: job, through: fanOut, with: relay, bearer: bearer, gate: gate, answered: answered)
        }
        await withTaskGroup(of: (Int, Answer).self) { group in
            var next = attempts.indices.makeIterator()
            for _ in 0..<min(options.concurrency, attempts.count) {
                if let index = next.next() {
                    group.addTask { (index, await self.post(attempts[index], of: job, with: relay, bearer: bearer, gate: gate)) }
                }
            }
            for await (index, answer) in group {
                answered(index, answer)
                if let index = next.next() {
                    group.addTask { (index, await self.post(attempts[index], of: job, with: relay, bearer: bearer, gate: gate)) }
                }
            }
        }
    }

    /// The HTTP/2 fan-out path to an `https` upstream, made once per upstream.
    private func fanOut(to upstream: String) -> HTTP2Upstream? {
        fanOuts.withLock { fanOuts in
            if let existing = fanOuts[upstream] { return existing }
            guard let made = HTTP2Upstream(upstream: upstream, caFile: options.caFile) else { return nil }
            fanOuts[upstream] = made
            return made
        }
    }

    /// Requests through the HTTP/2 fan-out path: `--relay-concurrency` streams at once, none
    /// started once the project's quota closes.
    private func post(
        _ attempts: [DeliveryAttempt], of job: OutboxJob, through fanOut: HTTP2Upstream, with relay: FCMSettings,
        bearer: String, gate: SendGate, answered: @escaping @Sendable (Int, Answer) -> Void
    ) async {
        await fanOut.postAll(
            path: relay.sendPath,
            headers: [
                ("content-type", "application/json"), ("authorization", "Bearer \(bearer)"),
                ("user-agent", UpstreamClient.userAgent),
            ],
            bodies: attempts.map { V1Outgoing.body(template: job.template, token: $0.token) },
            window: options.concurrency, timeout: options.requestTimeout,
            gate: FanOutGate(isClosed: gate.isClosed, quotaClosed: gate.quotaClosed), answered: answered)
    }

    /// One request through the general client (an `http` upstream).
    private func post(
        _ attempt: DeliveryAttempt, of job: OutboxJob, with relay: FCMSettings, bearer: String, gate: SendGate
    ) async -> Answer {
        // Cancelled at the round's deadline, or the quota closed: nothing is sent.
        guard !Task.isCancelled else { return .failure(CancellationError()) }
        guard !gate.isClosed() else { return .failure(NotSent()) }
        do {
            let answer = try await client.post(
                relay.sendURL, contentType: "application/json", authorization: "Bearer \(bearer)",
                body: V1Outgoing.body(template: job.template, token: attempt.token))
            // No request of the project starts after a 429.
            if answer.status == 429 { gate.quotaClosed(answer.retryAfter) }
            return .success(UpstreamAnswer(status: answer.status, retryAfter: answer.retryAfter, body: answer.body))
        } catch {
            return .failure(error)
        }
    }

    /// An answer that is not FCM's (a proxy's error page, a wrong `--upstream`): logged once a
    /// minute per project; the recipients are retried, and the project's `lastError` says it.
    private func reportUpstreamFault(_ fault: String, of project: Int64, upstream: String) {
        warnOnceAMinute(
            about: project, .upstreamFault, "relay: the upstream answered without FCM's error detail; retrying, pruning nothing",
            ["project": "\(project)", "answer": "\(fault)", "upstream": "\(upstream)"])
    }

    /// The faults a project's rounds may meet again and again.
    private enum Fault: String {
        case unreadableSettings, upstreamFault, unreachable, noAccessToken
    }

    /// A warning about a project's relay, at most once a minute per project and fault: a fault
    /// every round meets would otherwise write a line per page.
    private func warnOnceAMinute(
        about project: Int64, _ fault: Fault, _ message: Logger.Message, _ metadata: Logger.Metadata
    ) {
        let now = ContinuousClock.now
        let key = "\(project) \(fault.rawValue)"
        let due = faultsLogged.withLock { logged in
            guard logged[key].map({ now - $0 >= .seconds(60) }) ?? true else { return false }
            logged[key] = now
            return true
        }
        if due { logger.warning(message, metadata: metadata) }
    }

    /// FCM refused the access token, and no new one could be had.
    struct NoAccessToken: Error, CustomStringConvertible {
        var description: String { "FCM refused the access token, and the token endpoint gave no new one" }
    }
}
