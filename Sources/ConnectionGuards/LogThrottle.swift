import NIOCore
import Synchronization

/// One log line per ``interval`` for each kind of an event that can repeat without end — sockets
/// timing out, silent connections closed to make room, a connection limit reached again and
/// again — with the count of the events it held back in the next line it lets through. Whoever
/// opens sockets faster than the server's timeouts close them would otherwise write a line per
/// socket: a flood of the log, and a cost per socket paid in formatting and writing. The exact
/// counts of closed connections are in `fcm_registry_connections_closed_total`.
public final class LogThrottle: Sendable {
    let interval: TimeAmount

    private struct Kind {
        var lastLine: NIODeadline
        var held = 0
    }

    /// Per kind of event; the kinds are a handful of names fixed in the code.
    private let kinds = Mutex([String: Kind]())

    /// Every 10 seconds: the interval `docs/operations.md` gives for each of these lines.
    public init(every interval: TimeAmount = .seconds(10)) {
        self.interval = interval
    }

    /// Counts one event of `kind`. When a line is due, returns how many events it stands for:
    /// this one and those of the same kind held back since the last line. Otherwise nil: log
    /// nothing.
    public func event(_ kind: String = "", now: NIODeadline = .now()) -> Int? {
        kinds.withLock { kinds in
            guard let state = kinds[kind] else {
                kinds[kind] = Kind(lastLine: now)
                return 1
            }
            guard now - state.lastLine >= interval else {
                kinds[kind]?.held += 1
                return nil
            }
            kinds[kind] = Kind(lastLine: now)
            return state.held + 1
        }
    }
}
