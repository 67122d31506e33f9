import Logging
import NIOCore
import Synchronization

/// The HTTP/1 connections of one listener that are saying nothing: opened and not yet sent a
/// request head, or answered and kept alive, waiting for the next one.
///
/// A listener at its connection limit stops accepting, so whoever holds every slot with silent
/// sockets (a Slowloris attack, or a client that leaks connections) would keep each new client
/// waiting until a header or idle timeout frees a slot (10 and 60 s by default), and the
/// sockets opened in one burst time out in one burst, the next slot free only a timeout later.
/// Instead, every connection accepted near the limit has the connection silent longest give
/// way, once that one has been silent for ``grace``. A connection whose request is being read or
/// answered never gives way; a kept-alive client whose idle connection is closed opens another,
/// as HTTP clients do. Nothing is closed unless a new connection came in near the limit.
///
/// Connections give way one at a time, at most one every ``spacing``. Sockets that come straight
/// back when closed would otherwise cycle through every slot once a ``grace``, and each cycle
/// costs the server an accept and a close (about half a millisecond of CPU, measured).
public final class SilentConnections: Sendable {
    /// How long a connection must have been silent before it can give way: a client that
    /// connects and then sends its request takes milliseconds (1 s by default); an XMPP client
    /// shakes hands and opens its stream before it logs in, and is given longer.
    let grace: TimeAmount
    /// The least time between two connections giving way (see ``spacing(headerTimeout:maximumConnections:)``).
    let spacing: TimeAmount

    /// The header timeout divided by the connection limit, so that making room cycles silent
    /// sockets no faster than the header timeout alone does (at most twice the cost between
    /// them), and a tenth of a second at most: ten closes a second cost next to nothing, while a
    /// small limit or a long timeout would otherwise keep newcomers waiting for minutes.
    public static func spacing(headerTimeout: Duration, maximumConnections: Int) -> TimeAmount {
        min(TimeAmount(headerTimeout / max(1, maximumConnections)), .milliseconds(100))
    }

    private struct Entry: Sendable {
        var id: ObjectIdentifier
        var generation: UInt64
        var channel: any Channel
        var since: NIODeadline
    }

    private struct State {
        /// Silent connections in the order they fell silent, with stale entries (connections
        /// that spoke or closed since) dropped when they reach the front or on compaction.
        var queue = CircularBuffer<Entry>()
        /// The generation of each connection's current silence.
        var silent: [ObjectIdentifier: UInt64] = [:]
        var nextGeneration: UInt64 = 0
        /// Connections accepted near the limit for which none has given way yet.
        var wanted = 0
        /// Whether a close is on its way (waiting for ``grace``, or queued on its event loop).
        var closing = false
        /// The earliest the next connection may give way (``spacing`` after the last).
        var nextClose = NIODeadline.distantPast
    }

    private let state = Mutex(State())
    /// Connections closed to make room, logged in one line every 10 seconds at most.
    private let closeLog = LogThrottle()
    private let logger: Logger

    public init(spacing: TimeAmount, grace: TimeAmount = .seconds(1), logger: Logger) {
        self.spacing = spacing
        self.grace = grace
        self.logger = logger
    }

    /// `channel` has said nothing since now.
    public func fellSilent(_ channel: any Channel) {
        let id = ObjectIdentifier(channel)
        let start = state.withLock { state in
            state.nextGeneration &+= 1
            state.silent[id] = state.nextGeneration
            state.queue.append(
                Entry(id: id, generation: state.nextGeneration, channel: channel, since: channel.eventLoop.now))
            // Keep-alive connections fall silent after every answer: without compaction, entries
            // of connections that spoke again would pile up while no room is wanted.
            if state.queue.count > 2 &* state.silent.count &+ 64 {
                let silent = state.silent
                state.queue = CircularBuffer(state.queue.filter { silent[$0.id] == $0.generation })
            }
            // Room was wanted when none was silent (a burst is counted before any of it is set up).
            return Self.startClosing(&state)
        }
        if start { closeNext() }
    }

    /// `channel` sent a request head, or closed.
    public func spoke(_ channel: any Channel) {
        let id = ObjectIdentifier(channel)
        _ = state.withLock { $0.silent.removeValue(forKey: id) }
    }

    /// A connection was accepted near the limit: one silent connection is to give way, unless
    /// `most` already are. Slots freed by timeouts are filled again while closes wait their turn,
    /// so without the cap the demand would outlive an attack and close idle kept-alive
    /// connections after it.
    func wantRoom(atMost most: Int = .max) {
        let start = state.withLock { state in
            state.wanted = min(state.wanted &+ 1, max(1, most))
            return Self.startClosing(&state)
        }
        if start { closeNext() }
    }

    /// The listener is no longer near its limit: whatever room was wanted is there.
    func enoughRoom() {
        state.withLock { $0.wanted = 0 }
    }

    /// Whether to start closing: room is wanted, some connection is silent, and no close is on its way.
    private static func startClosing(_ state: inout State) -> Bool {
        guard state.wanted > 0, !state.closing, longestSilent(&state) != nil else { return false }
        state.closing = true
        return true
    }

    /// Closes the connection silent longest once it has been silent for ``grace`` (and
    /// ``spacing`` has passed since the last), then the next while room is still wanted. The check
    /// and the close run on the connection's own event loop: a request head read there cannot
    /// slip in between them.
    private func closeNext() {
        let next: (entry: Entry, at: NIODeadline)? = state.withLock { state in
            guard state.wanted > 0, let oldest = Self.longestSilent(&state) else {
                state.closing = false
                return nil
            }
            return (oldest, max(oldest.since + self.grace, state.nextClose))
        }
        guard let (next, at) = next else { return }
        next.channel.eventLoop.scheduleTask(deadline: at) {
            let givesWay = self.state.withLock { state in
                // Spoke, closed or no longer wanted since: nothing to do but look again.
                guard state.wanted > 0, state.silent[next.id] == next.generation else { return false }
                state.silent.removeValue(forKey: next.id)
                state.wanted &-= 1
                state.nextClose = next.channel.eventLoop.now + self.spacing
                return true
            }
            if givesWay {
                next.channel.close(promise: nil)
                ClosedBecause.makingRoom.count()
                if let closed = self.closeLog.event() {
                    self.logger.notice(
                        "closing silent connections to make room",
                        metadata: ["closed": "\(closed)", "peer": "\(next.channel.remoteAddress?.description ?? "?")"])
                }
            }
            self.closeNext()
        }
    }

    /// The entry of the connection silent longest, after dropping stale entries before it.
    private static func longestSilent(_ state: inout State) -> Entry? {
        while let first = state.queue.first {
            if state.silent[first.id] == first.generation { return first }
            state.queue.removeFirst()
        }
        return nil
    }
}
