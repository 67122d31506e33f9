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
    /// The outcomes of `page.alreadyGone`: failed `UNREGISTERED` without a request.
    private let gone: [DeliveryOutcome]
    /// The fewest outcomes a slice is worth a transaction for, before the page ends.
    private let smallestSlice: Int
    private let state: Mutex<State>

    private struct State: ~Copyable {
        var arrivals: [Arrival?]
        /// `arrivals[..<contiguous]` have all arrived.
        var contiguous = 0
        /// `arrivals[..<taken]` went out in slices.
        var taken = 0
        /// The cursor of the last slice handed out; gone recipients up to it went with it.
        var takenCursor = Int64.min
        /// Whether some request of the page has an answer.
        var proven = false
        var ended = false
        var waiter: CheckedContinuation<Void, Never>?

        /// Whether a slice may go out now: some answer came, and `smallest` outcomes in a row (or
        /// the page's last ones) wait to be taken.
        func sliceIsReady(smallest: Int) -> Bool {
            proven && contiguous > taken && (contiguous - taken >= smallest || contiguous == arrivals.count)
        }
    }

    init(_ page: AttemptPage, smallestSlice: Int) {
        self.page = page
        gone = page.goneOutcomes
        self.smallestSlice = max(1, smallestSlice)
        state = Mutex(State(arrivals: Array(repeating: nil, count: page.attempts.count)))
    }

    /// An attempt's outcome, once.
    func arrived(_ index: Int, _ outcome: DeliveryOutcome, answer: ChannelAnswer) {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            guard index < state.arrivals.count, state.arrivals[index] == nil else { return nil }
            state.arrivals[index] = Arrival(outcome: outcome, answer: answer)
            if case .answered = answer { state.proven = true }
            while state.contiguous < state.arrivals.count, state.arrivals[state.contiguous] != nil {
                state.contiguous += 1
            }
            guard state.sliceIsReady(smallest: smallestSlice), let waiter = state.waiter else { return nil }
            state.waiter = nil
            return waiter
        }
        waiter?.resume()
    }

    /// Every request has its answer, or will never have one.
    func end() {
        let waiter = state.withLock { state -> CheckedContinuation<Void, Never>? in
            state.ended = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume()
    }

    /// The next slice to record while the page is in flight: waits for `smallestSlice` outcomes in
    /// a row (or the page's last ones). `nil` once the page has ended: what is left is `rest()`'s.
    func nextSlice() async -> SentPage? {
        while true {
            let taken = state.withLock { state -> SentPage?? in
                if state.ended { return .some(nil) }
                guard state.sliceIsReady(smallest: smallestSlice) else { return nil }
                return slice(&state, to: state.contiguous)
            }
            if let taken { return taken }
            await withCheckedContinuation { continuation in
                let wake = state.withLock { state -> Bool in
                    guard !state.ended, !state.sliceIsReady(smallest: smallestSlice) else { return true }
                    state.waiter = continuation
                    return false
                }
                if wake { continuation.resume() }
            }
        }
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
    /// The outcomes of the recipients the walk found gone: failed `UNREGISTERED` without a request.
    var goneOutcomes: [DeliveryOutcome] {
        alreadyGone.map { DeliveryOutcome(attempt: $0, state: .failed, error: "UNREGISTERED", nextAttemptAt: nil) }
    }
}
