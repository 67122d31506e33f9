import Foundation
import Logging
import Metrics
import Registry
import ServiceLifecycle
import Synchronization

/// The delivery engine: drains the outbox through a channel (`DeliveryChannel`; FCM HTTP v1 is
/// the first). It claims jobs (with a lease, so that two servers never work the same one), reads
/// their pages, keeps each project within its budget and quota, has the channel send each round,
/// records the outcomes as they arrive (in slices, with the cursor: `PageInFlight`), prunes the
/// tokens the channel says are gone, and retries what may be retried.
///
/// On SIGTERM it claims nothing more, lets each job finish the page in flight and record it, and
/// gives the job back: a restart goes on where it stopped, without duplicates. A page still out
/// half the shutdown deadline later (an upstream that never answers) has its requests ended there:
/// what was answered is recorded, the rest stays pending for the next start, and the server
/// stops within its deadline. Cancelled (the deadline passed), it ends every job at once. After `kill -9`,
/// the jobs' leases expire (or the server, started again under its name, takes them back) and
/// what was sent and not recorded is sent again: at least once, and duplicates bounded by the
/// requests in flight and the slice being written.
public final class DeliveryWorker: Service, Sendable {
    let registry: RegistryService
    let options: RelayOptions
    let handoff: RelayHandoff
    let logger: Logger
    private let channel: any DeliveryChannel
    private let pacer: ProjectPacer
    private let budget: ProjectBudget
    private let settings: RelaySettingsCache
    /// The jobs being worked, by id.
    private let active = Mutex<[Int64: (job: OutboxJob, task: Task<Void, Never>)]>([:])
    private let stopping = Atomic<Bool>(false)
    /// Fired once a stopping server's pages in flight have had their time: their requests end.
    private let sendsStop = StopSignal()
    /// How long the server may take to stop, from SIGTERM (`--shutdown-deadline`).
    private let shutdownDeadline: Duration
    private let projects = Mutex<[Int64: Project]>([:])
    /// Fan-outs worked at once; each sends up to `options.concurrency` requests at a time.
    static let jobsAtOnce = 4
    /// Fan-outs of one project worked at once: they share the project's rate, so more would
    /// only keep other projects waiting.
    static let jobsPerProject = jobsAtOnce / 2
    /// How long a fan-out is worked before it goes back to the outbox, behind those waiting.
    static let turn: Duration = .seconds(5)

    public init(
        registry: RegistryService, channel: any DeliveryChannel, options: RelayOptions, handoff: RelayHandoff,
        logger: Logger, shutdownDeadline: Duration = .seconds(10)
    ) {
        self.shutdownDeadline = shutdownDeadline
        self.registry = registry
        self.channel = channel
        self.options = options
        self.handoff = handoff
        self.logger = logger
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
        let stopTimer = Mutex<Task<Void, Never>?>(nil)
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
            // The group stops its peers one after another, all within the deadline: the pages
            // in flight take half of it at most.
            let grace = shutdownDeadline / 2
            stopTimer.withLock { timer in
                timer = Task { [sendsStop] in
                    try? await Task.sleep(for: grace)
                    sendsStop.fire()
                }
            }
        }
        handoff.detach()
        await withTaskCancellationHandler {
            for working in active.withLock({ Array($0.values) }) { await working.task.value }
        } onCancel: { [self] in
            // Past the deadline: every job ends now, its requests with it.
            sendsStop.fire()
            for working in active.withLock({ Array($0.values) }) { working.task.cancel() }
        }
        stopTimer.withLock { $0?.cancel() }
        await channel.shutdown()
    }

    /// A quota pause another server met stops this server's requests of the project as well,
    /// within half a second, not only its next claims.
    private func adoptOtherServersPauses() async {
        // A server whose projects do not relay (an emulator) reads nothing for it.
        guard (try? await settings.settings().isEmpty) == false,
            let paused = try? await registry.sendBudget.pausedProjects(at: Date()) else { return }
        for (project, until) in paused {
            pacer.pause(project, for: .milliseconds(Int(max(0, until.timeIntervalSinceNow) * 1000)), recorded: true)
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

    /// Works a job page after page, as a pipeline: while page N is in flight, what is left of page
    /// N-1 is recorded, page N+1 is read, and page N's outcomes are recorded in slices as they
    /// arrive. What is sent and not recorded is at most page N's requests in flight, the slice
    /// being written, and page N-1's last slice: that bounds the duplicates a `kill -9` can cause.
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
            let pastDeadline = Date() >= job.deadline
            if pastDeadline || page.attempts.isEmpty {
                // Nothing to send: what was sent is recorded first, then this page as it is.
                guard try await settle(&unrecorded, of: job, in: project) else { return }
                let expired =
                    pastDeadline
                    ? page.attempts.map {
                        DeliveryOutcome(
                            attempt: $0, state: .failed, error: channel.words.deadlinePassed, nextAttemptAt: nil)
                    } : []
                let gone = page.goneOutcomes(worded: channel.words.gone)
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
            // This page goes out; meanwhile the one before it is recorded, the next one read, and
            // this one's outcomes recorded as they arrive.
            let inFlight = PageInFlight(page, gone: channel.words.gone)
            let previous = unrecorded
            async let recordedAndRead = recordWhileSending(previous, inFlight, of: job, in: project)
            do {
                try await withLeaseRenewed(job) { await self.send(inFlight, of: job, with: relay) }
            } catch {
                inFlight.end()
                _ = try? await recordedAndRead
                throw error
            }
            guard let next = try await recordedAndRead else { return }  // another server holds it now
            unrecorded = nil
            let arrivals = inFlight.arrivals
            if arrivals.allSatisfy({ $0.answer == .unanswered }), stopping.load(ordering: .relaxed) {
                // Ended by the stop: nothing was answered, nothing is recorded, and the job goes
                // back as it was, for the next start.
                try await outbox.release(job, claimant: me, notBefore: Date())
                return
            }
            if arrivals.allSatisfy({ $0.answer == .unanswered }) {
                // No answer at all (FCM or its token endpoint unreachable): an outage, not these
                // recipients' failure. Nothing of the page is recorded (no slice goes out before an
                // answer), the cursor stays, and the job waits with back-off; its deadline still
                // bounds it.
                outages += 1
                let wait = min(60, RetryPolicy.backOff(afterAttempts: outages, retryAfter: nil))
                logger.warning(
                    "relay: no answer from the channel",
                    metadata: [
                        "channel": "\(relay.channel)", "settings": "\(relay.settingsJSON)", "retry.in": "\(Int(wait))s",
                    ])
                try await outbox.release(job, claimant: me, notBefore: Date().addingTimeInterval(wait))
                return
            }
            outages = 0
            // What the page ends with and never went out (the quota closed first) is not recorded:
            // it is read again after the pause, and so is the page read after it.
            let (rest, cutShort) = inFlight.rest()
            unrecorded = rest
            ahead = cutShort ? nil : next
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

    /// The side of the pipeline that runs while a page is in flight: records what is left of the
    /// page before it, reads the page after it, then records the page's slices as they come.
    /// `nil` when the job is no longer this worker's to go on with.
    private func recordWhileSending(
        _ previous: SentPage?, _ inFlight: PageInFlight, of job: OutboxJob, in project: Project
    ) async throws -> AttemptPage? {
        var previous = previous
        guard try await settle(&previous, of: job, in: project) else { return nil }
        let next = try await registry.outbox.nextAttempts(
            of: job, after: inFlight.page, now: Date(), limit: await roundSize(of: job))
        while let slice = await inFlight.nextSlice() {
            // A slice never finishes the job: what follows it in the page is still pending.
            guard try await recordAndApply(slice.outcomes, page: slice.page, of: job, in: project, mayFinish: false) != nil
            else { return nil }
        }
        return next
    }

    /// Records a page's outcomes, then applies them beyond the outbox. `nil` when another server
    /// holds the job now (nothing recorded).
    private func recordAndApply(
        _ outcomes: [DeliveryOutcome], page: AttemptPage, of job: OutboxJob, in project: Project, mayFinish: Bool = true
    ) async throws -> JobProgress? {
        guard
            let progress = try await registry.outbox.record(
                outcomes, of: job, page: page, claimant: handoff.serverID, leaseUntil: leaseEnd(), now: Date(),
                mayFinish: mayFinish)
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
        let sendsStop = sendsStop
        return try await withThrowingTaskGroup(of: LeaseStep<T>.self) { group in
            group.addTask {
                while !Task.isCancelled {
                    try await Task.sleep(for: lease / 3)
                    _ = try await outbox.renew(job, claimant: me, leaseUntil: Date().addingTimeInterval(lease.seconds))
                }
                return .renewing
            }
            group.addTask {
                try await Task.sleep(for: pageDeadline)
                throw PageTimedOut(deadline: pageDeadline)
            }
            group.addTask {
                await sendsStop.wait()
                return .stop
            }
            group.addTask { .done(await body()) }
            // Once the server's stop ends the sends, `body` is cancelled and returns what it has;
            // the other tasks' ends (cancelled) say nothing then.
            var stopped = false
            while true {
                let step: LeaseStep<T>?
                do {
                    step = try await group.next()
                } catch {
                    if stopped { continue }
                    throw error
                }
                switch step {
                case .done(let result)?:
                    group.cancelAll()
                    return result
                case .stop?:
                    stopped = true
                    group.cancelAll()
                case .renewing?:
                    continue
                case nil:
                    throw CancellationError()
                }
            }
        }
    }

    /// What ended one of `withLeaseRenewed`'s tasks.
    private enum LeaseStep<T: Sendable>: Sendable {
        case done(T)
        case stop
        case renewing
    }

    /// Sends a round of a job's recipients through the channel, within the project's budget, and
    /// turns each answer into the recipient's outcome as it arrives.
    ///
    /// After a quota pause, the round sends only what the slow start admits; the rest waits,
    /// unsent, for the next round.
    private func send(_ inFlight: PageInFlight, of job: OutboxJob, with relay: ChannelSettings) async {
        defer { inFlight.end() }
        let attempts = inFlight.page.attempts
        let admitted = pacer.admit(job.project, wanting: attempts.count)
        let going = Array(attempts.prefix(admitted))
        for index in admitted..<attempts.count {
            inFlight.arrived(index, notSent(attempts[index], of: job), answer: .notSent)
        }
        // A round cancelled at its deadline while waiting its turn sends nothing.
        guard await budget.take(job.project, count: going.count, direct: job.isDirect) else {
            for (index, attempt) in going.enumerated() {
                inFlight.arrived(index, outcome(of: .unanswered, for: attempt, of: job), answer: .unanswered)
            }
            return
        }
        let pacer = pacer
        let project = job.project
        let gate = SendGate(
            isClosed: { pacer.isPaused(project) },
            quotaClosed: { retryAfter in
                pacer.pause(project, for: .seconds(RetryPolicy.quotaPause(retryAfter: retryAfter)))
            })
        await channel.send(going, of: job, with: relay, gate: gate) { [self] index, answer in
            guard index < going.count else { return }
            inFlight.arrived(index, outcome(of: answer, for: going[index], of: job), answer: answer)
        }
        // A channel that returned without telling some answer: those requests count as unanswered.
        let untold = inFlight.missing(below: going.count)
        if !untold.isEmpty {
            logger.warning("relay: the channel left requests without an answer", metadata: ["requests": "\(untold.count)"])
            for index in untold {
                inFlight.arrived(index, outcome(of: .unanswered, for: going[index], of: job), answer: .unanswered)
            }
        }
        var delivered = 0
        var quotaClosed = false
        var answered = 0
        for arrival in inFlight.arrivals.prefix(going.count) {
            switch arrival.answer {
            case .answered(.delivered):
                delivered += 1
                answered += 1
            case .answered(.slowDown): quotaClosed = true
            case .answered: answered += 1
            case .notSent, .stalled, .unanswered: break
            }
        }
        Self.count("delivered", code: nil, times: delivered)
        if quotaClosed {
            await reportPause(of: job.project)
        } else if !pacer.isPaused(job.project) {
            // Only answers prove the quota open: requests held back or unanswered prove nothing.
            pacer.grow(job.project, after: answered)
        }
    }

    /// What a channel's answer does to the recipient.
    private func outcome(of answer: ChannelAnswer, for attempt: DeliveryAttempt, of job: OutboxJob) -> DeliveryOutcome {
        switch answer {
        case .answered(.delivered):
            // The common case, without a verdict's work per recipient: counted once a round.
            return DeliveryOutcome(attempt: attempt, state: .delivered, error: nil, nextAttemptAt: nil)
        case .answered(let verdict):
            return outcome(of: verdict, for: attempt, of: job)
        case .notSent:
            return notSent(attempt, of: job)
        case .stalled:
            // The rest of the round was answered: the upstream is there, this one request was
            // lost. It is tried again at once.
            return retried(attempt, of: job, code: channel.words.unanswered, after: 0)
        case .unanswered:
            // No access token, a connection error or timeout, a page cancelled at its deadline:
            // retried as after a 503.
            return outcome(of: .retryAfter(channel.words.unanswered, seconds: nil), for: attempt, of: job)
        }
    }

    /// A recipient whose request was held back: the quota is closed, or the slow start after it
    /// has not reached it yet. It is tried when the pause ends, and costs no attempt.
    private func notSent(_ attempt: DeliveryAttempt, of job: OutboxJob) -> DeliveryOutcome {
        let after = pacer.pause(of: job.project)?.seconds ?? 0
        return DeliveryOutcome(
            attempt: attempt, state: .pending, error: channel.words.quotaClosed,
            nextAttemptAt: Date().addingTimeInterval(after), sent: false)
    }

    /// What a verdict does to the recipient.
    private func outcome(of verdict: DeliveryVerdict, for attempt: DeliveryAttempt, of job: OutboxJob) -> DeliveryOutcome {
        switch verdict {
        case .delivered:
            Self.count("delivered", code: nil)
            return DeliveryOutcome(attempt: attempt, state: .delivered, error: nil, nextAttemptAt: nil)
        case .gone(let code):
            Self.count("pruned", code: code)
            return DeliveryOutcome(attempt: attempt, state: .failed, error: code, nextAttemptAt: nil, gone: true)
        case .failed(let code), .credentialsRefused(let code):
            Self.count("failed", code: code)
            return DeliveryOutcome(attempt: attempt, state: .failed, error: code, nextAttemptAt: nil)
        case .retryAfter(let code, let after):
            return retried(
                attempt, of: job, code: code,
                after: RetryPolicy.backOff(afterAttempts: attempt.attempts + 1, retryAfter: after))
        case .slowDown(let code, let seconds):
            // The quota is the project's: every send of it waits (the pause itself is taken and
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
        let word = channel.words.quotaClosed
        try? await registry.outbox.pause(project: project, until: until, error: word)
        logger.warning(
            "relay: project paused by FCM's quota",
            metadata: ["project": "\(project)", "seconds": "\(Int(pause.seconds.rounded(.up)))", "error": "\(word)"])
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
                if outcome.gone {
                    try await registry.prune(token, in: project)
                } else if outcome.state == .delivered, job.isDirect {
                    try await registry.adopt(token, in: project)
                }
            } catch {
                logger.warning("relay: cannot update a token after FCM's answer", metadata: ["error": "\(error)"])
            }
            if job.isDirect, outcome.state == .failed, let code = outcome.error {
                handoff.refused(token, channel.refusal(code, token: token), job: job.id)
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
