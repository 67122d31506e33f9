import Logging
import NIOCore
import Synchronization

/// The HTTP/1 connections of one listener that are saying nothing: opened and not yet sent a
/// request head, or kept alive after an answer and waiting for the next one.
///
/// A listener at its connection limit stops accepting, so whoever holds every slot with silent
/// sockets (a Slowloris attack, or a client that leaks connections) would keep every new client
/// waiting until the header or idle timeout frees a slot. Near the limit, each new connection
/// instead closes the connection that has been silent longest, once it has been silent for
/// ``grace``: a connection that is sending or being answered is never closed for room, and a
/// kept-alive client whose idle connection is closed opens another, as HTTP clients do.
final class SilentConnections: Sendable {
    /// How long a connection may stay silent before it can be closed to make room: a client
    /// that connects and then sends its request takes milliseconds.
    static let grace = TimeAmount.seconds(1)

    private struct Entry {
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
        /// Whether the listener is near its connection limit (see ``ConnectionLimit``).
        var crowded = false
        /// Whether a ``makeRoom()`` is scheduled for when the longest-silent connection has been
        /// silent long enough.
        var waiting = false
    }

    private let state = Mutex(State())
    private let logger: Logger

    init(logger: Logger) {
        self.logger = logger
    }

    /// `channel` has said nothing since now.
    func fellSilent(_ channel: any Channel) {
        let id = ObjectIdentifier(channel)
        let wait: Entry? = state.withLock { state in
            state.nextGeneration &+= 1
            state.silent[id] = state.nextGeneration
            state.queue.append(Entry(id: id, generation: state.nextGeneration, channel: channel, since: .now()))
            // Keep-alive connections fall silent after every answer: without compaction, entries
            // of connections that spoke again would pile up while no one is closed for room.
            if state.queue.count > 2 &* state.silent.count &+ 64 {
                let silent = state.silent
                state.queue = CircularBuffer(state.queue.filter { silent[$0.id] == $0.generation })
            }
            // Near the limit, a connection falling silent can give room later, even when room was
            // asked for before any was silent (a burst is counted before any of it is set up).
            guard state.crowded, !state.waiting, let oldest = Self.longestSilent(&state) else { return nil }
            state.waiting = true
            return oldest
        }
        if let wait { makeRoom(after: wait) }
    }

    /// `channel` sent a request head, or closed.
    func spoke(_ channel: any Channel) {
        let id = ObjectIdentifier(channel)
        _ = state.withLock { $0.silent.removeValue(forKey: id) }
    }

    /// Whether the listener is near its connection limit; room is made only then.
    func setCrowded(_ crowded: Bool) {
        state.withLock { $0.crowded = crowded }
    }

    /// Near the limit, closes the connection silent longest: now if it has been silent for
    /// ``grace``, otherwise once it has (if it is still silent and the listener still crowded
    /// then), or, when none is silent, the first to fall silent once it has been for ``grace``.
    /// One such wait at a time.
    func makeRoom() {
        let now = NIODeadline.now()
        enum Step {
            case close(Entry)
            case wait(Entry)
            case nothing
        }
        let step: Step = state.withLock { state in
            guard state.crowded, let oldest = Self.longestSilent(&state) else { return .nothing }
            if oldest.since + Self.grace <= now {
                state.queue.removeFirst()
                state.silent.removeValue(forKey: oldest.id)
                return .close(oldest)
            }
            guard !state.waiting else { return .nothing }
            state.waiting = true
            return .wait(oldest)
        }
        switch step {
        case .close(let entry):
            logger.notice(
                "closing a silent connection to make room",
                metadata: ["peer": "\(entry.channel.remoteAddress?.description ?? "?")"])
            entry.channel.close(promise: nil)
        case .wait(let entry):
            makeRoom(after: entry)
        case .nothing:
            break
        }
    }

    /// Tries again once `entry` has been silent for ``grace``.
    private func makeRoom(after entry: Entry) {
        entry.channel.eventLoop.scheduleTask(deadline: entry.since + Self.grace) {
            self.state.withLock { $0.waiting = false }
            self.makeRoom()
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
