import Synchronization

/// Each project's pause after the channel's quota closed, and the slow start after it. (The rate
/// itself is the budget's: `ProjectBudget`.)
///
/// After a pause, the quota may still be closed: rather than a page of requests that would all be
/// refused, one request goes first (the probe); each round answered without a 429 doubles what
/// the next may send, as TCP's slow start does, until a page goes whole again.
final class ProjectPacer: Sendable {
    private struct PauseState {
        var pausedUntil: ContinuousClock.Instant?
        /// How many requests the next round may send after a pause; `nil`: as many as it has.
        var allowance: Int?
        /// The pause was extended and nobody has logged and recorded it yet.
        var unreported = false
    }

    /// Past this allowance, the slow start is over.
    private let fullRound: Int
    private let states = Mutex<[Int64: PauseState]>([:])

    /// - Parameter fullRound: what a round sends once the slow start has grown to it (a page).
    init(fullRound: Int = 500) {
        self.fullRound = max(1, fullRound)
    }

    /// Pauses the project for `duration`: FCM answered 429 here, or (`recorded`) another server's
    /// pause was read from the database. The slow start begins when the pause ends.
    /// - Parameter recorded: the pause is logged and written already, by the server that met it.
    /// - Returns: whether this is news: the project was not already paused as long. A pause met
    ///   here is then to be logged and recorded (`takePauseReport`); every stream of a page
    ///   refused at once reports the same pause once.
    @discardableResult
    func pause(_ project: Int64, for duration: Duration, recorded: Bool = false) -> Bool {
        let until = ContinuousClock.now + duration
        return states.withLock { states in
            var state = states[project] ?? PauseState()
            state.allowance = 1
            if let paused = state.pausedUntil, paused >= until - .milliseconds(500) {
                states[project] = state
                return false
            }
            state.pausedUntil = until
            if !recorded { state.unreported = true }
            states[project] = state
            return true
        }
    }

    /// The pause still to be logged and recorded, once: `nil` when it has been (or there is none).
    func takePauseReport(_ project: Int64) -> Duration? {
        let now = ContinuousClock.now
        return states.withLock { states in
            guard var state = states[project], state.unreported, let until = state.pausedUntil, until > now
            else { return nil }
            state.unreported = false
            states[project] = state
            return until - now
        }
    }

    /// How long the project is still paused; `nil` when it is not.
    func pause(of project: Int64) -> Duration? {
        let now = ContinuousClock.now
        return states.withLock { states in
            guard let until = states[project]?.pausedUntil, until > now else { return nil }
            return until - now
        }
    }

    /// Whether no new request of the project may start now.
    func isPaused(_ project: Int64) -> Bool {
        pause(of: project) != nil
    }

    /// How many of `wanted` requests the project's next round may send: all of them, unless a
    /// slow start after a pause holds it to fewer.
    func admit(_ project: Int64, wanting wanted: Int) -> Int {
        states.withLock { states in min(wanted, states[project]?.allowance ?? wanted) }
    }

    /// A round of `sent` requests was answered without a 429: the next may send twice as many.
    func grow(_ project: Int64, after sent: Int) {
        guard sent > 0 else { return }
        states.withLock { states in
            guard var state = states[project], let allowance = state.allowance, sent >= allowance else { return }
            state.allowance = allowance * 2 >= fullRound ? nil : allowance * 2
            states[project] = state
        }
    }
}
