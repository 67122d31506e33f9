import Foundation
import Logging
import Registry
import Synchronization

/// One job, worked page after page as a pipeline: each page read, sent through the channel its
/// route names, recorded in slices as its answers arrive, and applied beyond the outbox.
extension DeliveryWorker {
    /// Where a page of a job goes, looked up once a page, never per recipient.
    struct Route: Sendable {
        /// The channel that sends: `nil` when the settings name one this server does not hold.
        var sender: (any DeliveryChannel)?
        /// Why there is no sender.
        var unknown: UnknownChannel?
        /// The channel whose words and refusals the page's outcomes take: the sender, else the
        /// server's own.
        var speaker: any DeliveryChannel
    }

    /// The channel a job's recipients go through. Today every recipient of a project goes through
    /// the channel its relay settings name; once a token carries a channel of its own, a page
    /// splits here by it.
    func route(_ job: OutboxJob, relay: ChannelSettings) -> Route {
        do {
            let channel = try channels.channel(named: relay.channel)
            return Route(sender: channel, unknown: nil, speaker: channel)
        } catch {
            return Route(sender: nil, unknown: error, speaker: ownChannel)
        }
    }

    func work(_ job: OutboxJob) async {
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
    func workPages(_ job: OutboxJob) async throws {
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
            let route = route(job, relay: relay)
            // Stopping, or this fan-out has had its turn: the page sent is recorded and the job goes
            // back, behind the project's fan-outs that wait (claims go by `notBefore`), so a
            // project's fan-outs share its rate in turns rather than the oldest taking it all.
            let turnOver = !job.isDirect && ContinuousClock.now - started >= Self.turn
            if stopping.load(ordering: .relaxed) || (turnOver && !handoff.isAwaited(job.id)) {
                guard try await settle(&unrecorded, of: job, in: project, via: route) else { return }
                try await outbox.release(job, claimant: me, notBefore: Date())
                return
            }
            if let pause = pacer.pause(of: job.project) {
                guard try await settle(&unrecorded, of: job, in: project, via: route) else { return }
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
                guard try await settle(&unrecorded, of: job, in: project, via: route) else { return }
                let expired =
                    pastDeadline
                    ? page.attempts.map {
                        DeliveryOutcome(
                            attempt: $0, state: .failed, error: route.speaker.words.deadlinePassed, nextAttemptAt: nil)
                    } : []
                let gone = page.goneOutcomes(worded: route.speaker.words.gone)
                guard let progress = try await recordAndApply(gone + expired, page: page, of: job, in: project, via: route)
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
            let inFlight = PageInFlight(page, gone: route.speaker.words.gone)
            let previous = unrecorded
            async let recordedAndRead = recordWhileSending(previous, inFlight, of: job, in: project, via: route)
            do {
                try await withLeaseRenewed(job) { await self.send(inFlight, of: job, with: relay, via: route) }
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
    func settle(_ unrecorded: inout SentPage?, of job: OutboxJob, in project: Project, via route: Route)
        async throws -> Bool
    {
        guard let sent = unrecorded else { return true }
        unrecorded = nil
        guard let progress = try await recordAndApply(sent.outcomes, page: sent.page, of: job, in: project, via: route)
        else {
            return false
        }
        return !progress.finished
    }

    /// The side of the pipeline that runs while a page is in flight: records what is left of the
    /// page before it, reads the page after it, then records the page's slices as they come.
    /// `nil` when the job is no longer this worker's to go on with.
    func recordWhileSending(
        _ previous: SentPage?, _ inFlight: PageInFlight, of job: OutboxJob, in project: Project, via route: Route
    ) async throws -> AttemptPage? {
        var previous = previous
        guard try await settle(&previous, of: job, in: project, via: route) else { return nil }
        let next = try await registry.outbox.nextAttempts(
            of: job, after: inFlight.page, now: Date(), limit: await roundSize(of: job))
        while let slice = await inFlight.nextSlice() {
            // A slice never finishes the job: what follows it in the page is still pending.
            guard
                try await recordAndApply(
                    slice.outcomes, page: slice.page, of: job, in: project, via: route, mayFinish: false) != nil
            else { return nil }
        }
        return next
    }

    /// Records a page's outcomes, then applies them beyond the outbox. `nil` when another server
    /// holds the job now (nothing recorded).
    func recordAndApply(
        _ outcomes: [DeliveryOutcome], page: AttemptPage, of job: OutboxJob, in project: Project, via route: Route,
        mayFinish: Bool = true
    ) async throws -> JobProgress? {
        guard
            let progress = try await registry.outbox.record(
                outcomes, of: job, page: page, claimant: handoff.serverID, leaseUntil: leaseEnd(), now: Date(),
                mayFinish: mayFinish)
        else { return nil }
        await apply(outcomes, of: job, in: project, via: route)
        return progress
    }

    /// Runs `body` while renewing the job's claim: a page against a slow upstream may take
    /// longer than the lease.
    func withLeaseRenewed<T: Sendable>(_ job: OutboxJob, _ body: @escaping @Sendable () async -> T)
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
    enum LeaseStep<T: Sendable>: Sendable {
        case done(T)
        case stop
        case renewing
    }


    /// What a recorded page means beyond the outbox: pruned tokens leave the registry, tokens
    /// only FCM knew join it, and a sender waiting on a direct send learns who was refused.
    func apply(_ outcomes: [DeliveryOutcome], of job: OutboxJob, in project: Project, via route: Route) async {
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
                handoff.refused(token, route.speaker.refusal(code, token: token), job: job.id)
            } else if job.isDirect, outcome.state == .delivered {
                handoff.delivered(token, job: job.id)
            }
        }
    }


    /// A page's requests did not all end within their deadline.
    struct PageTimedOut: Error, CustomStringConvertible {
        var deadline: Duration
        var description: String { "a page of requests to FCM took longer than \(deadline)" }
    }
}
