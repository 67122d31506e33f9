import Registry
import Synchronization

/// A page whose requests are out, and its outcomes as they arrive: the engine records them in
/// slices while the rest of the page is still in flight. So a `kill -9` repeats little more than
/// the requests in flight, and a slow answer holds back no one's record but its own.
///
/// A slice is the outcomes of a prefix of the page's attempts that have all arrived: a walk's
/// cursor can only move past recipients whose outcomes are written. Its cursor stops just before
/// the first walked recipient left out, and it carries the recipients found gone up to there.
///
/// A slice never ends with requests that never went out (held back or refused by the quota): if
/// nothing sent follows them, `rest()` leaves them to be read again after the pause.
///
/// No slice is handed out before one request of the page has an answer. A page that no one
/// answered (an outage) is then recorded by nobody, and costs its recipients no attempt.
final class PageInFlight: Sendable {
    /// What arrived for one attempt.
    struct Arrival: Sendable {
        var outcome: DeliveryOutcome
        var answer: ChannelAnswer
    }

    /// The page as read.
    let page: AttemptPage
    /// The outcomes of `page.alreadyGone`: failed as gone without a request.
    private let gone: [DeliveryOutcome]
    private let state: Mutex<State>

    /// How long outcomes wait to be taken in a slice, so that answers arriving close together
    /// share one transaction: at a high rate a slice holds a few milliseconds' answers; at a low one
    /// the lag a `kill -9` can find unrecorded stays as short.
    static let sliceInterval: Duration = .milliseconds(5)

    private struct State: ~Copyable {
        var arrivals: [Arrival?]
        /// `arrivals[..<contiguous]` have all arrived.
        var contiguous = 0
        /// The end of `arrivals[..<contiguous]` without its trailing requests that never went out
        /// (those wait for `rest()`, which leaves them to be read again).
        var recordable = 0
        /// `arrivals[..<taken]` went out in slices.
        var taken = 0
        /// The cursor of the last slice handed out; gone recipients up to it went with it.
        var takenCursor = Int64.min
        /// Since when outcomes have waited to be taken.
        var waitingSince: ContinuousClock.Instant?
        /// Whether some request of the page has an answer.
        var proven = false
        var ended = false
        var waiter: CheckedContinuation<Void, Never>?

        /// Whether outcomes wait to be taken: some answer came, and some outcomes in a row are in.
        var hasOutcomes: Bool { proven && recordable > taken }

        /// Whether a slice goes out now: outcomes have waited `sliceInterval`, or the page's last
        /// ones are in (a direct send's sender waits for them).
        func sliceIsDue(at now: ContinuousClock.Instant) -> Bool {
            guard hasOutcomes else { return false }
            return contiguous == arrivals.count || waitingSince.map { now - $0 >= PageInFlight.sliceInterval } ?? true
        }

        /// Until when a slice waits: `nil` while no outcome waits (until one arrives).
        var wakeUp: ContinuousClock.Instant? {
            hasOutcomes ? waitingSince.map { $0 + PageInFlight.sliceInterval } : nil
        }

        mutating func takeWaiter() -> CheckedContinuation<Void, Never>? {
            defer { waiter = nil }
            return waiter
        }
    }

    /// - Parameter goneWord: the channel's word for a recipient already gone.
    init(_ page: AttemptPage, gone goneWord: String) {
        self.page = page
        gone = page.goneOutcomes(worded: goneWord)
        state = Mutex(State(arrivals: Array(repeating: nil, count: page.attempts.count)))
    }

    /// An attempt's outcome, once.
    func arrived(_ index: Int, _ outcome: DeliveryOutcome, answer: ChannelAnswer) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard index < state.arrivals.count, state.arrivals[index] == nil else { return nil }
            let had = state.hasOutcomes
            state.arrivals[index] = Arrival(outcome: outcome, answer: answer)
            if case .answered = answer { state.proven = true }
            while state.contiguous < state.arrivals.count, let next = state.arrivals[state.contiguous] {
                state.contiguous += 1
                if next.outcome.sent { state.recordable = state.contiguous }
            }
            guard state.hasOutcomes else { return nil }
            if !had { state.waitingSince = .now }
            // The slice's wait starts now, or the page's last outcomes are in.
            return !had || state.contiguous == state.arrivals.count ? state.takeWaiter() : nil
        }
        waiter?.resume()
    }

    /// Every request has its answer, or will never have one.
    func end() {
        let waiter = state.withLock { state in
            state.ended = true
            return state.takeWaiter()
        }
        waiter?.resume()
    }

    /// The next slice to record while the page is in flight, once it is due (`sliceIsDue`). `nil`
    /// once the page has ended: what is left is `rest()`'s.
    func nextSlice() async -> SentPage? {
        while true {
            let step = state.withLock { state -> Step in
                if state.ended { return .ended }
                if state.sliceIsDue(at: .now) { return .slice(slice(&state, to: state.recordable)) }
                return .wait(until: state.wakeUp)
            }
            switch step {
            case .ended: return nil
            case .slice(let slice): return slice
            case .wait(let deadline):
                let timer = deadline.map { deadline in
                    Task { [self] in
                        guard (try? await Task.sleep(until: deadline)) != nil else { return }
                        state.withLock { $0.takeWaiter() }?.resume()
                    }
                }
                await withCheckedContinuation { continuation in
                    let now = state.withLock { state -> Bool in
                        // Something arrived since the wait was planned (its deadline changed): plan again.
                        guard !state.ended, !state.sliceIsDue(at: .now), state.wakeUp == deadline else { return true }
                        state.waiter = continuation
                        return false
                    }
                    if now { continuation.resume() }
                }
                timer?.cancel()
            }
        }
    }

    private enum Step {
        case ended
        case slice(SentPage)
        /// Until the deadline, or until something arrives (`nil`).
        case wait(until: ContinuousClock.Instant?)
    }

    /// The indexes below `count` that have had no arrival.
    func missing(below count: Int) -> [Int] {
        state.withLock { state in (0..<min(count, state.arrivals.count)).filter { state.arrivals[$0] == nil } }
    }

    /// Every attempt's arrival, in order, once the page has ended.
    var arrivals: [Arrival] {
        state.withLock { state in state.arrivals.map { $0! } }
    }

    /// Once the page has ended, what no slice took, without the requests at its end that never
    /// went out (held back by the quota, or refused by it): those are read again after the pause,
    /// as if this page had stopped before them.
    /// - Returns: the slice left to record (`nil`: none), and whether the page was cut short, so
    ///   that a page read after all of it must be read again.
    func rest() -> (SentPage?, cutShort: Bool) {
        state.withLock { state in
            var end = state.arrivals.count
            while end > state.taken, state.arrivals[end - 1]?.outcome.sent == false { end -= 1 }
            let cutShort = end < state.arrivals.count
            guard end > state.taken else { return (nil, cutShort) }
            return (slice(&state, to: end), cutShort)
        }
    }

    /// The slice of `arrivals[taken..<end]`, handed out.
    private func slice(_ state: inout State, to end: Int) -> SentPage {
        let (cursor, walked) = walk(upTo: end)
        let lower = state.takenCursor
        let goneHere = gone.filter { ($0.attempt.tokenID ?? lower) > lower && ($0.attempt.tokenID ?? lower) <= cursor }
        let attempts = Array(page.attempts[state.taken..<end])
        let outcomes = goneHere + state.arrivals[state.taken..<end].map { $0!.outcome }
        state.taken = end
        state.takenCursor = cursor
        state.waitingSince = nil
        return SentPage(
            page: AttemptPage(attempts: attempts, alreadyGone: goneHere.map(\.attempt), cursor: cursor, walked: walked),
            outcomes: outcomes)
    }

    /// Where the walk stands once `page.attempts[..<end]` are recorded: just before the first
    /// walked recipient left out (retries come first in a page, walked recipients after them), or
    /// where the whole page leaves it.
    private func walk(upTo end: Int) -> (cursor: Int64, walked: Bool) {
        if let next = page.attempts[end...].first(where: { $0.deliveryID == nil }), let id = next.tokenID {
            return (id - 1, false)
        }
        return (page.cursor, page.walked)
    }
}

/// Outcomes handed out to be recorded, with the part of the page they cover.
struct SentPage: Sendable {
    var page: AttemptPage
    var outcomes: [DeliveryOutcome]
}

extension AttemptPage {
    /// The outcomes of the recipients the walk found gone: failed as gone, in the channel's
    /// `word`, without a request.
    func goneOutcomes(worded word: String) -> [DeliveryOutcome] {
        alreadyGone.map { DeliveryOutcome(attempt: $0, state: .failed, error: word, nextAttemptAt: nil, gone: true) }
    }
}
