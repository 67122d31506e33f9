import Foundation
import Logging
import Registry
import Synchronization

/// One round through a channel, within the project's budget and quota, and what each answer does
/// to its recipient: decided by the answer's type, worded by the channel.
extension DeliveryWorker {
    /// Sends a round of a job's recipients through the channel, within the project's budget, and
    /// turns each answer into the recipient's outcome as it arrives.
    ///
    /// After a quota pause, the round sends only what the slow start admits; the rest waits,
    /// unsent, for the next round.
    func send(_ inFlight: PageInFlight, of job: OutboxJob, with relay: ChannelSettings, via route: Route) async {
        defer { inFlight.end() }
        let attempts = inFlight.page.attempts
        let words = route.speaker.words
        guard let channel = route.sender else {
            // Settings for a channel this server does not hold reach nobody: the round waits like
            // one without an answer (an outage, with back-off), and the log says why.
            logger.warning(
                "relay: the project's settings cannot be read; nothing is sent",
                metadata: ["project": "\(job.project)", "error": "\(route.unknown.map { "\($0)" } ?? "")"])
            for (index, attempt) in attempts.enumerated() {
                inFlight.arrived(index, outcome(of: .unanswered, for: attempt, of: job, words: words), answer: .unanswered)
            }
            return
        }
        let admitted = pacer.admit(job.project, wanting: attempts.count)
        let going = Array(attempts.prefix(admitted))
        for index in admitted..<attempts.count {
            inFlight.arrived(index, notSent(attempts[index], of: job, words: words), answer: .notSent)
        }
        // A round cancelled at its deadline while waiting its turn sends nothing.
        guard await budget.take(job.project, count: going.count, direct: job.isDirect) else {
            for (index, attempt) in going.enumerated() {
                inFlight.arrived(index, outcome(of: .unanswered, for: attempt, of: job, words: words), answer: .unanswered)
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
            inFlight.arrived(index, outcome(of: answer, for: going[index], of: job, words: words), answer: answer)
        }
        // A channel that returned without telling some answer: those requests count as unanswered.
        let untold = inFlight.missing(below: going.count)
        if !untold.isEmpty {
            logger.warning("relay: the channel left requests without an answer", metadata: ["requests": "\(untold.count)"])
            for index in untold {
                inFlight.arrived(index, outcome(of: .unanswered, for: going[index], of: job, words: words), answer: .unanswered)
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
            await reportPause(of: job.project, words: words)
        } else if !pacer.isPaused(job.project) {
            // Only answers prove the quota open: requests held back or unanswered prove nothing.
            pacer.grow(job.project, after: answered)
        }
    }

    /// What a channel's answer does to the recipient.
    func outcome(of answer: ChannelAnswer, for attempt: DeliveryAttempt, of job: OutboxJob, words: ChannelWords)
        -> DeliveryOutcome
    {
        switch answer {
        case .answered(.delivered):
            // The common case, without a verdict's work per recipient: counted once a round.
            return DeliveryOutcome(attempt: attempt, state: .delivered, error: nil, nextAttemptAt: nil)
        case .answered(let verdict):
            return outcome(of: verdict, for: attempt, of: job)
        case .notSent:
            return notSent(attempt, of: job, words: words)
        case .stalled:
            // The rest of the round was answered: the upstream is there, this one request was
            // lost. It is tried again at once.
            return retried(attempt, of: job, code: words.unanswered, after: 0)
        case .unanswered:
            // No access token, a connection error or timeout, a page cancelled at its deadline:
            // retried as after a 503.
            return outcome(of: .retryAfter(words.unanswered, seconds: nil), for: attempt, of: job)
        }
    }

    /// A recipient whose request was held back: the quota is closed, or the slow start after it
    /// has not reached it yet. It is tried when the pause ends, and costs no attempt.
    func notSent(_ attempt: DeliveryAttempt, of job: OutboxJob, words: ChannelWords) -> DeliveryOutcome {
        let after = pacer.pause(of: job.project)?.seconds ?? 0
        return DeliveryOutcome(
            attempt: attempt, state: .pending, error: words.quotaClosed,
            nextAttemptAt: Date().addingTimeInterval(after), sent: false)
    }

    /// What a verdict does to the recipient.
    func outcome(of verdict: DeliveryVerdict, for attempt: DeliveryAttempt, of job: OutboxJob) -> DeliveryOutcome {
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
    func retried(_ attempt: DeliveryAttempt, of job: OutboxJob, code: String, after: TimeInterval)
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
    func reportPause(of project: Int64, words: ChannelWords) async {
        guard let pause = pacer.takePauseReport(project) else { return }
        let until = Date().addingTimeInterval(pause.seconds)
        let word = words.quotaClosed
        try? await registry.outbox.pause(project: project, until: until, error: word)
        logger.warning(
            "relay: project paused by FCM's quota",
            metadata: ["project": "\(project)", "seconds": "\(Int(pause.seconds.rounded(.up)))", "error": "\(word)"])
    }

    /// Another try after `after` seconds, unless that is past the message's deadline.
    func pending(_ attempt: DeliveryAttempt, of job: OutboxJob, code: String, after: TimeInterval)
        -> DeliveryOutcome
    {
        let next = Date().addingTimeInterval(after)
        guard next < job.deadline else {
            return DeliveryOutcome(attempt: attempt, state: .failed, error: code, nextAttemptAt: nil)
        }
        return DeliveryOutcome(attempt: attempt, state: .pending, error: code, nextAttemptAt: next)
    }
}
