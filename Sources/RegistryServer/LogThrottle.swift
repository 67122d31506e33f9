import NIOCore
import Synchronization

/// One log line per ``interval`` for an event that can repeat without end — sockets timing out,
/// silent connections closed to make room, a connection limit reached again and again — with
/// the count of the events it held back in the next line it lets through. Whoever opens sockets
/// faster than the server's timeouts close them would otherwise write a line per socket: a
/// flood of the log, and a cost per socket paid in formatting and writing. The exact counts are
/// in `fcm_registry_connections_closed_total`.
final class LogThrottle: Sendable {
    let interval: TimeAmount

    private struct State {
        var lastLine: NIODeadline?
        var held = 0
    }

    private let state = Mutex(State())

    init(every interval: TimeAmount) {
        self.interval = interval
    }

    /// Counts one event. When a line is due, returns how many events it stands for: this one
    /// and those held back since the last line. Otherwise nil: log nothing.
    func event(now: NIODeadline = .now()) -> Int? {
        state.withLock { state in
            state.held += 1
            guard state.lastLine.map({ now - $0 >= interval }) ?? true else { return nil }
            state.lastLine = now
            defer { state.held = 0 }
            return state.held
        }
    }
}
