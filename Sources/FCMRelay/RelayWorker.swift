import FCMWire
import Foundation
import Logging
import Metrics
import Registry
import ServiceLifecycle
import Synchronization

/// Drains the outbox into FCM HTTP v1: claims jobs (with a lease, so that two servers never work
/// the same one), sends each recipient's message over HTTP/2, records a page of outcomes at a
/// time with the cursor, prunes the tokens FCM says are gone, and retries what may be retried.
///
/// On SIGTERM it claims nothing more, lets each job finish the page in flight and record it, and
/// gives the job back: a restart goes on where it stopped, without duplicates. After `kill -9`,
/// the jobs' leases expire and a page in flight is sent again: at least once, and duplicates
/// bounded by what was in flight.
public final class RelayWorker: Service, Sendable {
    let registry: RegistryService
    let options: RelayOptions
    let handoff: RelayHandoff
    let logger: Logger
    private let client: UpstreamClient
    private let accessTokens: AccessTokenCache
    private let pacer: ProjectPacer
    private let budget: ProjectBudget
    private let settings: RelaySettingsCache
    /// The jobs being worked, by id.
    private let active = Mutex<[Int64: (job: OutboxJob, task: Task<Void, Never>)]>([:])
    private let stopping = Atomic<Bool>(false)
    private let projects = Mutex<[Int64: Project]>([:])
    /// The HTTP/2 fan-out path, per `https` upstream.
    private let fanOuts = Mutex<[String: HTTP2Upstream]>([:])
    /// When each project's last upstream fault was logged.
    private let faultsLogged = Mutex<[Int64: ContinuousClock.Instant]>([:])
    /// Fan-outs worked at once; each sends up to `options.concurrency` requests at a time.
    static let jobsAtOnce = 4
    /// Fan-outs of one project worked at once: they share the project's rate, so more would
    /// only keep other projects waiting.
    static let jobsPerProject = jobsAtOnce / 2
    /// How long a fan-out is worked before it goes back to the outbox, behind those waiting.
    static let turn: Duration = .seconds(5)

    public init(registry: RegistryService, options: RelayOptions, handoff: RelayHandoff, logger: Logger) throws {
        self.registry = registry
        self.options = options
        self.handoff = handoff
        self.logger = logger
        client = try UpstreamClient(options: options)
        accessTokens = AccessTokenCache(client: client)
        pacer = ProjectPacer(fullRound: options.pageSize)
        budget = ProjectBudget(store: registry.sendBudget, defaultRate: options.ratePerSecond)
        settings = RelaySettingsCache(outbox: registry.outbox)
    }

    public func run() async throws {
        // Claims this server held when it last stopped without giving them back (`kill -9`, a
        // crash): taken back at once rather than after their lease, when it keeps its name.
        if handoff.keepsItsName {
            do {
                try await registry.outbox.releaseAll(claimedBy: handoff.serverID)
            } catch {
                logger.warning("relay: cannot take back this server's earlier claims", metadata: ["error": "\(error)"])
            }
        }
        handoff.attach { [self] job in start(job) }
        await withGracefulShutdownHandler {
            var lastGauges = ContinuousClock.now - .seconds(60)
            var lastPauses = ContinuousClock.now - .seconds(60)
            while !stopping.load(ordering: .relaxed) && !Task.isCancelled {
                if ContinuousClock.now - lastPauses >= .milliseconds(500) {
                    await adoptOtherServersPauses()
                    lastPauses = .now
                }
                await claimWork()
                if ContinuousClock.now - lastGauges >= .seconds(5) {
                    await updateGauges()
                    lastGauges = .now
                }
                await handoff.waitForWork(options.pollInterval)
            }
        } onGracefulShutdown: { [self] in
            stopping.store(true, ordering: .relaxed)
            handoff.wake()
        }
        handoff.detach()
        for working in active.withLock({ Array($0.values) }) { await working.task.value }
        for fanOut in fanOuts.withLock({ Array($0.values) }) { await fanOut.shutdown() }
        try? await client.shutdown()
    }

    /// A quota pause another server met stops this server's requests of the project as well,
    /// within half a second, not only its next claims.
    private func adoptOtherServersPauses() async {
        // A server whose projects do not relay (an emulator) reads nothing for it.
        guard (try? await settings.settings().isEmpty) == false,
            let paused = try? await registry.sendBudget.pausedProjects(at: Date()) else { return }
        for (project, until) in paused {
            pacer.adopt(project, pausedFor: .milliseconds(Int(max(0, until.timeIntervalSinceNow) * 1000)))
        }
    }

    /// Claims what this server has room for, one job at a time, so that no project takes more
    /// than its share: at most `jobsAtOnce / 2` of a server's fan-outs are one project's, and
    /// another project's send finds a place at the next look. A direct send taken by this server
    /// is worked at once, beside the fan-outs, and never waits for a place.
    private func claimWork() async {
        do {
            // A server whose projects do not relay (an emulator) writes nothing to look.
            guard try await !settings.settings().isEmpty else { return }
            while !stopping.load(ordering: .relaxed) {
                let (room, full) = active.withLock { working in
                    var perProject: [Int64: Int] = [:]
                    for (job, _) in working.values where !job.isDirect { perProject[job.project, default: 0] += 1 }
                    let busy = perProject.values.reduce(0, +)
                    return (Self.jobsAtOnce - busy, Set(perProject.filter { $0.value >= Self.jobsPerProject }.keys))
                }
                guard room > 0 else { return }
                let jobs = try await registry.outbox.claim(
                    handoff.serverID, leaseUntil: leaseEnd(), now: Date(), limit: 1, skipping: full)
                guard !jobs.isEmpty else { return }
                for job in jobs { start(job) }
            }
        } catch {
            logger.warning("relay: cannot claim outbox work", metadata: ["error": "\(error)"])
        }
    }

    /// Works `job` in a task of its own, once.
    private func start(_ job: OutboxJob) {
        active.withLock { working in
            guard working[job.id] == nil else { return }
            working[job.id] = (job, Task { [self] in
                await work(job)
                active.withLock { _ = $0.removeValue(forKey: job.id) }
                handoff.finished(job.id)
                handoff.wake()
            })
        }
    }

    /// Recipients a page reads: a page, or fewer while the slow start after a pause holds the
    /// project to fewer, and at most half the project's rate, so that a round is sent within the
    /// second whose budget it took.
    private func roundSize(of job: OutboxJob) async -> Int {
        pacer.admit(job.project, wanting: min(options.pageSize, max(1, await budget.rate(of: job.project) / 2)))
    }

    private func leaseEnd() -> Date {
        Date().addingTimeInterval(options.lease.seconds)
    }

    // MARK: - One job

    private func work(_ job: OutboxJob) async {
        do {
            try await workPages(job)
        } catch {
            logger.warning(
                "relay: job stopped", metadata: ["message.id": "\(job.messageID)", "error": "\(error)"])
            try? await registry.outbox.release(
                job, claimant: handoff.serverID, notBefore: Date().addingTimeInterval(options.pollInterval.seconds))
        }
    }

    /// A page sent whose outcomes are not recorded yet: they are recorded while the next page is
    /// in flight, so that the connection to FCM does not wait for the database.
    private struct SentPage: Sendable {
        var page: AttemptPage
        var outcomes: [DeliveryOutcome]
    }

    /// Works a job page after page, as a pipeline: while page N is in flight, page N-1's outcomes
    /// are recorded and page N+1 is read. At most two pages are sent and not recorded, which
    /// bounds the duplicates a `kill -9` can cause.
    private func workPages(_ job: OutboxJob) async throws {
        let outbox = registry.outbox
        let me = handoff.serverID
        var outages = 0
        var unrecorded: SentPage?
        var ahead: AttemptPage?
        let started = ContinuousClock.now
        while true {
            guard let project = try await project(job.project) else { return }
            guard let relay = try await settings.settings()[job.project] else {
                // Turned off: `--off` has failed what was pending, and finished the job (what was
                // sent and not recorded yet counts as failed with the rest).
                return
            }
            // Stopping, or this fan-out has had its turn: the page sent is recorded and the job goes
            // back, behind the project's fan-outs that wait (claims go by `notBefore`), so a
            // project's fan-outs share its rate in turns rather than the oldest taking it all.
            let turnOver = !job.isDirect && ContinuousClock.now - started >= Self.turn
            if stopping.load(ordering: .relaxed) || (turnOver && !handoff.isAwaited(job.id)) {
                guard try await settle(&unrecorded, of: job, in: project) else { return }
                try await outbox.release(job, claimant: me, notBefore: Date())
                return
            }
            if let pause = pacer.pause(of: job.project) {
                guard try await settle(&unrecorded, of: job, in: project) else { return }
                ahead = nil  // read before the pause: read again after it
                // A sender waiting for this job's answer keeps it here through the pause.
                if handoff.isAwaited(job.id) {
                    try? await Task.sleep(for: min(pause, .milliseconds(250)))
                    continue
                }
                try await outbox.release(job, claimant: me, notBefore: Date().addingTimeInterval(pause.seconds))
                return
            }
            let page: AttemptPage
            if let read = ahead {
                page = read
                ahead = nil
            } else {
                page = try await outbox.nextAttempts(
                    of: job, after: unrecorded?.page, now: Date(), limit: await roundSize(of: job))
            }
            let gone = page.alreadyGone.map {
                DeliveryOutcome(attempt: $0, state: .failed, error: "UNREGISTERED", nextAttemptAt: nil)
            }
            let pastDeadline = Date() >= job.deadline
            if pastDeadline || page.attempts.isEmpty {
                // Nothing to send: what was sent is recorded first, then this page as it is.
                guard try await settle(&unrecorded, of: job, in: project) else { return }
                let expired =
                    pastDeadline
                    ? page.attempts.map {
                        DeliveryOutcome(attempt: $0, state: .failed, error: "DEADLINE_EXCEEDED", nextAttemptAt: nil)
                    } : []
                guard let progress = try await recordAndApply(gone + expired, page: page, of: job, in: project)
                else { return }  // another server holds it now
                if progress.finished { return }
                if page.isEmpty {
                    // Nothing due now: wait here for a retry that is near, else give the job back.
                    let next = progress.nextRetryAt ?? Date().addingTimeInterval(options.pollInterval.seconds)
                    let wait = next.timeIntervalSinceNow
                    let awaited = handoff.isAwaited(job.id)
                    if (wait > 5 && !awaited) || stopping.load(ordering: .relaxed) {
                        try await outbox.release(job, claimant: me, notBefore: next)
                        return
                    }
                    // Near, or a sender waits for the answer (until its timeout): wait here.
                    try? await Task.sleep(for: .milliseconds(Int(min(max(wait, 0.01), awaited ? 0.25 : 5) * 1000)))
                }
                continue
            }
            // This page goes out; meanwhile the one before it is recorded and the next one read.
            let previous = unrecorded
            async let recordedAndRead = recordThenRead(previous, after: page, of: job, in: project)
            let sent: [(outcome: DeliveryOutcome, answered: Bool)]
            do {
                sent = try await withLeaseRenewed(job) { await self.send(page.attempts, of: job, with: relay) }
            } catch {
                _ = try? await recordedAndRead
                throw error
            }
            guard let next = try await recordedAndRead else { return }  // another server holds it now
            unrecorded = nil
            if !sent.isEmpty, sent.allSatisfy({ !$0.outcome.sent }) {
                // Nothing went out or was taken: the quota closed first. Nothing is recorded, the
                // cursor stays, and the page is read again once the pause is over.
                ahead = nil
                continue
            }
            if sent.allSatisfy({ !$0.answered }) {
                // No answer at all (FCM or its token endpoint unreachable): an outage, not these
                // recipients' failure. Nothing is recorded, the cursor stays, and the job waits
                // with back-off; its deadline still bounds it.
                outages += 1
                let wait = min(60, DeliveryPolicy.backOff(afterAttempts: outages, retryAfter: nil))
                logger.warning(
                    "relay: no answer from FCM", metadata: ["upstream": "\(relay.upstream)", "retry.in": "\(Int(wait))s"])
                try await outbox.release(job, claimant: me, notBefore: Date().addingTimeInterval(wait))
                return
            }
            outages = 0
            unrecorded = SentPage(page: page, outcomes: gone + sent.map(\.outcome))
            ahead = next
        }
    }

    /// Records the page sent last, if any. `false` when the job is no longer this worker's to
    /// go on with: another server holds it, or that page finished it.
    private func settle(_ unrecorded: inout SentPage?, of job: OutboxJob, in project: Project) async throws -> Bool {
        guard let sent = unrecorded else { return true }
        unrecorded = nil
        guard let progress = try await recordAndApply(sent.outcomes, page: sent.page, of: job, in: project) else {
            return false
        }
        return !progress.finished
    }

    /// The side of the pipeline that runs while a page is in flight: records the page before it,
    /// then reads the page after it. `nil` when the job is no longer this worker's to go on with.
    private func recordThenRead(_ previous: SentPage?, after page: AttemptPage, of job: OutboxJob, in project: Project)
        async throws -> AttemptPage?
    {
        var previous = previous
        guard try await settle(&previous, of: job, in: project) else { return nil }
        return try await registry.outbox.nextAttempts(of: job, after: page, now: Date(), limit: await roundSize(of: job))
    }

    /// Records a page's outcomes, then applies them beyond the outbox. `nil` when another server
    /// holds the job now (nothing recorded).
    private func recordAndApply(_ outcomes: [DeliveryOutcome], page: AttemptPage, of job: OutboxJob, in project: Project)
        async throws -> JobProgress?
    {
        guard
            let progress = try await registry.outbox.record(
                outcomes, of: job, page: page, claimant: handoff.serverID, leaseUntil: leaseEnd(), now: Date())
        else { return nil }
        await apply(outcomes, of: job, in: project)
        return progress
    }

    /// Runs `body` while renewing the job's claim: a page against a slow upstream may take
    /// longer than the lease.
    private func withLeaseRenewed<T: Sendable>(_ job: OutboxJob, _ body: @escaping @Sendable () async -> T)
        async throws -> T
    {
        let outbox = registry.outbox
        let me = handoff.serverID
        let lease = options.lease
        // However an upstream misbehaves, a page ends: its requests are cancelled past this, and
        // the page, unrecorded, is tried again.
        let pageDeadline =
            options.requestTimeout * 2
            + .seconds(Double(options.pageSize * Self.jobsAtOnce) / Double(await budget.rate(of: job.project)) + 5)
        return try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask {
                while !Task.isCancelled {
                    try await Task.sleep(for: lease / 3)
                    _ = try await outbox.renew(job, claimant: me, leaseUntil: Date().addingTimeInterval(lease.seconds))
                }
                return nil
            }
            group.addTask {
                try await Task.sleep(for: pageDeadline)
                throw PageTimedOut(deadline: pageDeadline)
            }
            group.addTask { await body() }
            while let result = try await group.next() {
                if let result {
                    group.cancelAll()
                    return result
                }
            }
            throw CancellationError()
        }
    }

    /// One request's answer, or the error that left it without one.
    typealias Answer = Result<UpstreamClient.Answer, any Error>

    /// Sends a page, `options.concurrency` requests at a time, and reads each answer by FCM's
    /// words.
    ///
    /// After a quota pause, the round sends only what the slow start admits; the rest waits,
    /// unsent, for the next round. A 401 that is about our access token (not a
    /// `THIRD_PARTY_AUTH_ERROR`, which is about the app's APNs or web-push credentials) fetches a
    /// new token once, and the refused requests go again with it.
    private func send(_ attempts: [DeliveryAttempt], of job: OutboxJob, with relay: RelaySettings) async
        -> [(outcome: DeliveryOutcome, answered: Bool)]
    {
        let admitted = pacer.admit(job.project, wanting: attempts.count)
        let going = Array(attempts.prefix(admitted))
        let held = attempts.dropFirst(admitted).map { (notSent($0, of: job), true) }
        // One access token for the page, not a look-up per request.
        guard let bearer = try? await accessTokens.token(for: job.project, settings: relay) else {
            return await unanswered(attempts, of: job)
        }
        var answers = await post(going, of: job, with: relay, bearer: bearer)
        let refused = answers.indices.filter { Self.isOurTokenRefused(answers[$0]) }
        if !refused.isEmpty {
            await accessTokens.drop(project: job.project, token: bearer)
            if let fresh = try? await accessTokens.token(for: job.project, settings: relay) {
                logger.notice(
                    "relay: FCM refused the access token; sending again with a new one",
                    metadata: ["project": "\(job.project)", "requests": "\(refused.count)"])
                let again = await post(refused.map { going[$0] }, of: job, with: relay, bearer: fresh)
                for (index, answer) in zip(refused, again) { answers[index] = answer }
            } else {
                // No new token (the token endpoint out of reach): the refusal was about our token,
                // not the recipients, who wait like any unanswered request.
                for index in refused { answers[index] = .failure(NoAccessToken()) }
            }
        }
        var outcomes: [(outcome: DeliveryOutcome, answered: Bool)] = []
        outcomes.reserveCapacity(attempts.count)
        var delivered = 0
        var quotaClosed = false
        var answered = 0
        var upstreamFault: String?
        for (attempt, answer) in zip(going, answers) {
            if case .success = answer { answered += 1 }
            switch answer {
            case .success(let answer) where (200..<300).contains(answer.status):
                // The common case, without a verdict's work per recipient; counted once a page.
                delivered += 1
                outcomes.append((DeliveryOutcome(attempt: attempt, state: .delivered, error: nil, nextAttemptAt: nil), true))
            case .success(let answer):
                let verdict = DeliveryPolicy.verdict(
                    status: answer.status, code: answer.errorCode, retryAfter: answer.retryAfter)
                if case .pauseProject = verdict { quotaClosed = true }
                if answer.errorCode == nil, upstreamFault == nil { upstreamFault = "HTTP \(answer.status)" }
                outcomes.append((outcome(of: verdict, for: attempt, of: job), true))
            case .failure(let error as NotSent):
                _ = error
                outcomes.append((notSent(attempt, of: job), true))
            case .failure(let error as Stalled):
                // The rest of the page was answered: FCM is there, this one request was lost. It
                // is tried again at once, on a new stream.
                logger.debug("relay: a request stalled", metadata: ["message.id": "\(job.messageID)", "error": "\(error)"])
                outcomes.append((retried(attempt, of: job, code: "UNAVAILABLE", after: 0), true))
            case .failure:
                // No answer (connection error, reset, timeout).
                outcomes += await unanswered([attempt], of: job)
            }
        }
        Self.count("delivered", code: nil, times: delivered)
        if quotaClosed {
            await reportPause(of: job.project)
        } else if !pacer.isPaused(job.project) {
            // Only answers prove the quota open: requests held back or unanswered prove nothing.
            pacer.grow(job.project, after: answered)
        }
        if let upstreamFault { reportUpstreamFault(upstreamFault, of: job.project, upstream: relay.upstream) }
        return outcomes + held
    }

    /// Whether an answer refuses our access token (and not the app's own APNs or web-push
    /// credentials, `THIRD_PARTY_AUTH_ERROR`).
    private static func isOurTokenRefused(_ answer: Answer) -> Bool {
        guard case .success(let answer) = answer, answer.status == 401 else { return false }
        return answer.errorCode != "THIRD_PARTY_AUTH_ERROR"
    }

    /// Posts one request per attempt, each its answer, in order.
    private func post(_ attempts: [DeliveryAttempt], of job: OutboxJob, with relay: RelaySettings, bearer: String)
        async -> [Answer]
    {
        guard !attempts.isEmpty else { return [] }
        if let fanOut = fanOut(to: relay.upstream) {
            return await post(attempts, of: job, through: fanOut, with: relay, bearer: bearer)
        }
        return await withTaskGroup(of: (Int, Answer).self) { group in
            var answers = [Answer?](repeating: nil, count: attempts.count)
            var next = attempts.indices.makeIterator()
            for _ in 0..<min(options.concurrency, attempts.count) {
                if let index = next.next() {
                    group.addTask { (index, await self.post(attempts[index], of: job, with: relay, bearer: bearer)) }
                }
            }
            for await (index, answer) in group {
                answers[index] = answer
                if let index = next.next() {
                    group.addTask { (index, await self.post(attempts[index], of: job, with: relay, bearer: bearer)) }
                }
            }
            return answers.map { $0! }
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

    /// Requests through the HTTP/2 fan-out path: paced as a whole, `--relay-concurrency` streams
    /// at once, none started once the project's quota closes.
    private func post(
        _ attempts: [DeliveryAttempt], of job: OutboxJob, through fanOut: HTTP2Upstream, with relay: RelaySettings,
        bearer: String
    ) async -> [Answer] {
        // A page cancelled at its deadline while waiting its turn sends nothing.
        guard await budget.take(job.project, count: attempts.count, direct: job.isDirect) else {
            return attempts.map { _ in .failure(CancellationError()) }
        }
        let pacer = pacer
        let project = job.project
        let gate = SendGate(
            isClosed: { pacer.isPaused(project) },
            quotaClosed: { retryAfter in
                pacer.pause(project, for: .seconds(max(retryAfter ?? DeliveryPolicy.quotaPause, 1)))
            })
        return await fanOut.postAll(
            path: relay.sendPath, authorization: "Bearer \(bearer)",
            bodies: attempts.map { V1Outgoing.body(template: job.template, token: $0.token) },
            window: options.concurrency, timeout: options.requestTimeout, gate: gate)
    }

    /// One request through the general client (an `http` upstream).
    private func post(_ attempt: DeliveryAttempt, of job: OutboxJob, with relay: RelaySettings, bearer: String)
        async -> Answer
    {
        // Cancelled at the page's deadline while waiting its turn: nothing is sent.
        guard await budget.take(job.project, count: 1, direct: job.isDirect) else { return .failure(CancellationError()) }
        guard !pacer.isPaused(job.project) else { return .failure(NotSent()) }
        do {
            let answer = try await client.post(
                relay.sendURL, contentType: "application/json", authorization: "Bearer \(bearer)",
                body: V1Outgoing.body(template: job.template, token: attempt.token))
            if answer.status == 429 {
                // No request of the project starts after this answer.
                pacer.pause(job.project, for: .seconds(max(answer.retryAfter ?? DeliveryPolicy.quotaPause, 1)))
            }
            return .success(answer)
        } catch {
            return .failure(error)
        }
    }

    /// Recipients FCM gave no answer for (no access token, a connection error or timeout, a page
    /// cancelled at its deadline): each is retried as after a 503.
    private func unanswered(_ attempts: [DeliveryAttempt], of job: OutboxJob) async
        -> [(outcome: DeliveryOutcome, answered: Bool)]
    {
        let verdict = DeliveryPolicy.verdict(status: nil, code: nil, retryAfter: nil)
        return attempts.map { (outcome(of: verdict, for: $0, of: job), false) }
    }

    /// A recipient whose request was held back: the quota is closed, or the slow start after it
    /// has not reached it yet. It is tried when the pause ends, and costs no attempt.
    private func notSent(_ attempt: DeliveryAttempt, of job: OutboxJob) -> DeliveryOutcome {
        let after = pacer.pause(of: job.project)?.seconds ?? 0
        return DeliveryOutcome(
            attempt: attempt, state: .pending, error: "QUOTA_EXCEEDED", nextAttemptAt: Date().addingTimeInterval(after),
            sent: false)
    }

    /// What a verdict does to the recipient.
    private func outcome(of verdict: DeliveryVerdict, for attempt: DeliveryAttempt, of job: OutboxJob) -> DeliveryOutcome {
        switch verdict {
        case .delivered:
            Self.count("delivered", code: nil)
            return DeliveryOutcome(attempt: attempt, state: .delivered, error: nil, nextAttemptAt: nil)
        case .prune(let code):
            Self.count("pruned", code: code)
            return DeliveryOutcome(attempt: attempt, state: .failed, error: code, nextAttemptAt: nil)
        case .fail(let code, _):
            Self.count("failed", code: code)
            return DeliveryOutcome(attempt: attempt, state: .failed, error: code, nextAttemptAt: nil)
        case .retry(let code, let after):
            return retried(
                attempt, of: job, code: code,
                after: DeliveryPolicy.backOff(afterAttempts: attempt.attempts + 1, retryAfter: after))
        case .pauseProject(let code, let seconds):
            // FCM's quota is the project's: every send of it waits (the pause itself is taken and
            // recorded once per page, by `send`). Refused, so not delivered: no attempt is spent.
            pacer.pause(job.project, for: .seconds(seconds))
            Self.count("paused", code: code)
            var waiting = pending(attempt, of: job, code: code, after: TimeInterval(seconds))
            waiting.sent = false
            return waiting
        }
    }

    /// Another try after `after` seconds, unless the recipient's attempts are spent.
    private func retried(_ attempt: DeliveryAttempt, of job: OutboxJob, code: String, after: TimeInterval)
        -> DeliveryOutcome
    {
        guard attempt.attempts + 1 < options.maximumAttempts else {
            Self.count("failed", code: code)
            return DeliveryOutcome(attempt: attempt, state: .failed, error: code, nextAttemptAt: nil)
        }
        Self.count("retried", code: code)
        return pending(attempt, of: job, code: code, after: after)
    }

    /// The project's pause, once: logged and written when this server first learns of it (every
    /// stream of a page refused at once reports the same pause), so that the servers that claim
    /// next wait as well.
    private func reportPause(of project: Int64) async {
        guard let pause = pacer.takePauseReport(project) else { return }
        let until = Date().addingTimeInterval(pause.seconds)
        try? await registry.outbox.pause(project: project, until: until, error: "QUOTA_EXCEEDED")
        logger.warning(
            "relay: project paused by FCM's quota",
            metadata: ["project": "\(project)", "seconds": "\(Int(pause.seconds.rounded(.up)))", "error": "QUOTA_EXCEEDED"])
    }

    /// An answer that is not FCM's (a proxy's error page, a wrong `--upstream`): logged once a
    /// minute per project; the recipients are retried, and the project's `lastError` says it.
    private func reportUpstreamFault(_ fault: String, of project: Int64, upstream: String) {
        let now = ContinuousClock.now
        let due = faultsLogged.withLock { logged in
            guard logged[project].map({ now - $0 >= .seconds(60) }) ?? true else { return false }
            logged[project] = now
            return true
        }
        guard due else { return }
        logger.warning(
            "relay: the upstream answered without FCM's error detail; retrying, pruning nothing",
            metadata: ["project": "\(project)", "answer": "\(fault)", "upstream": "\(upstream)"])
    }

    /// Another try after `after` seconds, unless that is past the message's deadline.
    private func pending(_ attempt: DeliveryAttempt, of job: OutboxJob, code: String, after: TimeInterval)
        -> DeliveryOutcome
    {
        let next = Date().addingTimeInterval(after)
        guard next < job.deadline else {
            return DeliveryOutcome(attempt: attempt, state: .failed, error: code, nextAttemptAt: nil)
        }
        return DeliveryOutcome(attempt: attempt, state: .pending, error: code, nextAttemptAt: next)
    }

    /// What a recorded page means beyond the outbox: pruned tokens leave the registry, tokens
    /// only FCM knew join it, and a sender waiting on a direct send learns who was refused.
    private func apply(_ outcomes: [DeliveryOutcome], of job: OutboxJob, in project: Project) async {
        for outcome in outcomes {
            let token = outcome.attempt.token
            do {
                switch (outcome.state, outcome.error) {
                case (.failed, "UNREGISTERED"?), (.failed, "SENDER_ID_MISMATCH"?):
                    try await registry.prune(token, in: project)
                case (.delivered, _) where job.isDirect:
                    try await registry.adopt(token, in: project)
                default:
                    break
                }
            } catch {
                logger.warning("relay: cannot update a token after FCM's answer", metadata: ["error": "\(error)"])
            }
            if job.isDirect, outcome.state == .failed, let code = outcome.error {
                handoff.refused(token, DeliveryPolicy.problem(for: code, token: token, retryAfter: nil), job: job.id)
            } else if job.isDirect, outcome.state == .delivered {
                handoff.delivered(token, job: job.id)
            }
        }
    }

    private func project(_ rowID: Int64) async throws -> Project? {
        if let project = projects.withLock({ $0[rowID] }) { return project }
        let all = try await registry.projects()
        projects.withLock { cache in
            for project in all { cache[project.rowID] = project }
        }
        return all.first { $0.rowID == rowID }
    }

    /// FCM refused the access token, and no new one could be had.
    struct NoAccessToken: Error, CustomStringConvertible {
        var description: String { "FCM refused the access token, and the token endpoint gave no new one" }
    }

    /// A page's requests did not all end within their deadline.
    struct PageTimedOut: Error, CustomStringConvertible {
        var deadline: Duration
        var description: String { "a page of requests to FCM took longer than \(deadline)" }
    }

    // MARK: - Metrics

    /// The send counters, made once each: a counter is looked up by label and dimensions in the
    /// metrics system, which is too slow to do once per delivery.
    private static let counters = Mutex<[String: Counter]>([:])

    private static func count(_ outcome: String, code: String?, times: Int = 1) {
        guard times > 0 else { return }
        let key = "\(outcome) \(code ?? "")"
        let counter = counters.withLock { counters in
            if let counter = counters[key] { return counter }
            let counter = Counter(
                label: "fcm_registry_relay_sends_total", dimensions: [("outcome", outcome), ("error", code ?? "")])
            counters[key] = counter
            return counter
        }
        counter.increment(by: times)
    }

    /// The queue of each relaying project, as `GET /api/relay` shows it.
    private func updateGauges() async {
        guard let relaying = try? await settings.settings() else { return }
        for rowID in relaying.keys {
            guard let project = try? await project(rowID),
                let status = try? await registry.relayStatus(in: project)
            else { continue }
            let dimensions = [("project", project.projectId)]
            Gauge(label: "fcm_registry_relay_pending", dimensions: dimensions).record(status.pending)
            Gauge(label: "fcm_registry_relay_in_flight", dimensions: dimensions).record(status.inFlight)
            Gauge(label: "fcm_registry_relay_delivered", dimensions: dimensions).record(status.delivered)
            Gauge(label: "fcm_registry_relay_failed", dimensions: dimensions).record(status.failed)
            Gauge(label: "fcm_registry_relay_pruned", dimensions: dimensions).record(status.pruned)
            Gauge(label: "fcm_registry_relay_paused", dimensions: dimensions).record(status.pausedUntil == nil ? 0 : 1)
        }
    }
}
