import Foundation
import Registry
import Synchronization
import XMPP

/// What a connection's writer is told to do.
enum XMPPOutgoing: Sendable {
    case stanza(String)
    /// Write `</stream:stream>` and close: a drained connection whose work is done.
    case end
    /// Write a stream error and close.
    case fail(condition: String, text: String)
}

/// An upstream message (from an emulated device) or a delivery receipt, on its way to the app server.
public struct UpstreamMessage: Sendable {
    public var messageID: String
    /// The `<gcm>` JSON, as the app server reads it.
    public var json: String
    public var isReceipt: Bool

    public init(messageID: String, json: String, isReceipt: Bool) {
        self.messageID = messageID
        self.json = json
        self.isReceipt = isReceipt
    }
}

/// Every XMPP session of every project, and the upstream traffic between emulated devices and
/// them (XMPP reference §5.3–§5.5, §6).
///
/// - Upstream messages go to one of the project's sessions that is not draining and has fewer
///   than `pendingPerConnection` unacknowledged; with none, they wait in memory, at most
///   `waitingPerProject` per project (they do not survive a restart).
/// - What a session leaves unacknowledged when it ends is delivered again to another session.
/// - A draining session gets `CONNECTION_DRAINING`, takes no new downstream messages, and is
///   closed once its downstream messages are answered and its upstream ones acknowledged, or
///   after `drainTimeout`.
public final class XMPPHub: Sendable {
    public struct Limits: Sendable {
        /// Downstream messages awaiting their ack or nack, and upstream ones awaiting the app
        /// server's ack, on one connection (FCM's 100).
        public var pendingPerConnection = 100
        public var connectionsPerProject = 1000
        /// Upstream messages waiting, per project, for an XMPP session to take them.
        public var waitingPerProject = 10_000
        /// How long drained sessions get to finish (the shutdown deadline).
        public var drainTimeout = Duration.seconds(10)
        /// An unacknowledged receipt stops counting against the connection after this long:
        /// some clients never acknowledge receipts.
        public var receiptAckTimeout = Duration.seconds(30)

        public init() {}
    }

    /// One connected, authenticated session.
    public struct SessionInfo: Sendable {
        public var id: String
        public var project: Project
        public var jid: String
        public var connectedAt: Date
        public var draining: Bool
        /// Bound a resource: upstream messages may go to it.
        public var bound: Bool
        public var pendingDownstream: Int
        public var unackedUpstream: Int
    }

    enum Registration: Sendable {
        case registered(id: String)
        case tooManyConnections
        case shuttingDown
    }

    enum DownstreamAdmission: Sendable {
        case admitted
        case draining
        case tooManyPending
    }

    /// Where an upstream message went.
    public enum UpstreamDelivery: Sendable, Equatable {
        case sent(connection: String)
        case waiting(position: Int)
        case queueFull
    }

    private struct Session {
        var info: SessionInfo
        let outbox: XMPPOutbox
        /// Upstream messages and receipts sent and not yet acknowledged, by message id, with the
        /// order they were sent in.
        var unacked: [String: (message: UpstreamMessage, sequence: Int)] = [:]
        /// Receipts by when they were sent, oldest first from `receiptHead`; acknowledged ones are
        /// skipped as they come up.
        var receipts: [(id: String, sentAt: ContinuousClock.Instant)] = []
        var receiptHead = 0

        var isIdle: Bool { info.pendingDownstream == 0 && unacked.isEmpty }

        /// Room for upstream messages.
        func room(_ limit: Int) -> Int {
            info.draining || !info.bound ? 0 : limit - unacked.count
        }

        /// Receipts unacknowledged since before `cutoff` stop taking room; amortized O(1).
        mutating func expireReceipts(before cutoff: ContinuousClock.Instant) {
            while receiptHead < receipts.count && receipts[receiptHead].sentAt < cutoff {
                let id = receipts[receiptHead].id
                if unacked[id]?.message.isReceipt == true { unacked[id] = nil }
                receiptHead += 1
            }
            if receiptHead > 64 && receiptHead * 2 > receipts.count {
                receipts.removeFirst(receiptHead)
                receiptHead = 0
            }
            info.unackedUpstream = unacked.count
        }
    }

    /// Upstream messages waiting for a session, oldest first; O(1) at both ends that matter.
    private struct WaitingQueue {
        private var items: [UpstreamMessage] = []
        private var head = 0

        var count: Int { items.count - head }
        var isEmpty: Bool { count == 0 }

        mutating func append(_ message: UpstreamMessage) {
            items.append(message)
        }

        mutating func popFirst() -> UpstreamMessage? {
            guard head < items.count else { return nil }
            let message = items[head]
            head += 1
            if head > 64 && head * 2 > items.count {
                items.removeFirst(head)
                head = 0
            }
            return message
        }

        /// Puts messages a closed session left unacknowledged back in front.
        mutating func prepend(_ messages: [UpstreamMessage]) {
            items.replaceSubrange(0..<head, with: messages)
            head = 0
        }
    }

    private struct State {
        var sessions: [Int64: [String: Session]] = [:]
        var waiting: [Int64: WaitingQueue] = [:]
        var nextID = 1
        var nextSequence = 0
        var shuttingDown = false
    }

    public let limits: Limits
    private let state = Mutex(State())

    public init(limits: Limits = Limits()) {
        self.limits = limits
    }

    // MARK: - Sessions

    func register(project: Project, jid: String, outbox: XMPPOutbox) -> Registration {
        state.withLock { state in
            guard !state.shuttingDown else { return .shuttingDown }
            guard state.sessions[project.rowID, default: [:]].count < limits.connectionsPerProject else {
                return .tooManyConnections
            }
            let id = "c\(state.nextID)"
            state.nextID += 1
            state.sessions[project.rowID, default: [:]][id] = Session(
                info: SessionInfo(
                    id: id, project: project, jid: jid, connectedAt: Date(), draining: false, bound: false,
                    pendingDownstream: 0, unackedUpstream: 0),
                outbox: outbox)
            return .registered(id: id)
        }
    }

    /// Names the session's full JID once the client has bound a resource; from then on it takes
    /// upstream messages (before, they would arrive in the middle of the stream restart). A
    /// session drained while it logged in learns it now.
    func bind(_ id: String, project: Project, jid: String) {
        state.withLock { state in
            guard var session = state.sessions[project.rowID]?[id] else { return }
            session.info.jid = jid
            session.info.bound = true
            state.sessions[project.rowID]?[id] = session
            if session.info.draining {
                session.outbox.send(.stanza(CCSWire.connectionDraining))
                endIfDrained(session)
            } else {
                pump(project.rowID, &state)
            }
        }
    }

    /// Forgets a session whose connection ended; what it left unacknowledged goes to another.
    func remove(_ id: String, project: Project) {
        state.withLock { state in
            guard let session = state.sessions[project.rowID]?.removeValue(forKey: id) else { return }
            if state.sessions[project.rowID]?.isEmpty == true { state.sessions[project.rowID] = nil }
            let returned = session.unacked.values.sorted { $0.sequence < $1.sequence }.map(\.message)
            if !returned.isEmpty { state.waiting[project.rowID, default: WaitingQueue()].prepend(returned) }
            pump(project.rowID, &state)
        }
    }

    public func sessions(of project: Project) -> [SessionInfo] {
        state.withLock { state in
            (state.sessions[project.rowID] ?? [:]).values.map(\.info).sorted { $0.connectedAt < $1.connectedAt }
        }
    }

    public func waitingCount(of project: Project) -> Int {
        state.withLock { $0.waiting[project.rowID]?.count ?? 0 }
    }

    public var waitingCount: Int {
        state.withLock { $0.waiting.values.reduce(0) { $0 + $1.count } }
    }

    public var sessionCount: Int {
        state.withLock { $0.sessions.values.reduce(0) { $0 + $1.count } }
    }

    // MARK: - Downstream

    /// Counts a downstream message against the connection, unless it is draining or has
    /// `pendingPerConnection` downstream messages unanswered (upstream ones have a budget of their own).
    func admitDownstream(_ id: String, project: Project) -> DownstreamAdmission {
        state.withLock { state in
            guard let session = state.sessions[project.rowID]?[id] else { return .draining }
            if session.info.draining { return .draining }
            guard session.info.pendingDownstream < limits.pendingPerConnection else { return .tooManyPending }
            state.sessions[project.rowID]?[id]?.info.pendingDownstream += 1
            return .admitted
        }
    }

    /// Writes a downstream message's ack or nack and stops counting it, in one step, so the app
    /// server never sees the answer while the message still counts.
    func answerDownstream(_ id: String, project: Project, with stanza: String) {
        state.withLock { state in
            guard var session = state.sessions[project.rowID]?[id] else { return }
            session.info.pendingDownstream -= 1
            session.outbox.send(.stanza(stanza))
            state.sessions[project.rowID]?[id] = session
            endIfDrained(session)
        }
    }

    // MARK: - Upstream

    /// Sends an upstream message or receipt to one of the project's sessions (`preferring` one,
    /// when it has room), or keeps it waiting for one.
    public func deliver(_ message: UpstreamMessage, to project: Project, preferring preferred: String? = nil)
        -> UpstreamDelivery
    {
        state.withLock { state in
            // Older waiting messages first: whatever room there is goes to them.
            pump(project.rowID, &state)
            let waiting = state.waiting[project.rowID]?.count ?? 0
            if waiting == 0 {
                expireReceipts(project.rowID, &state)
                if let target = chooseSession(project.rowID, preferring: preferred, state) {
                    send(message, to: target, project: project.rowID, &state)
                    return .sent(connection: target)
                }
            }
            guard waiting < limits.waitingPerProject else { return .queueFull }
            state.waiting[project.rowID, default: WaitingQueue()].append(message)
            return .waiting(position: waiting + 1)
        }
    }

    /// The app server's ack of an upstream message or receipt; receipts may be acknowledged with or
    /// without their `dr2:` prefix. `false` when the connection has no such message unacknowledged.
    @discardableResult
    func acknowledge(_ messageID: String, session id: String, project: Project) -> Bool {
        state.withLock { state in
            guard var session = state.sessions[project.rowID]?[id] else { return false }
            guard let key = [messageID, "dr2:" + messageID].first(where: { session.unacked[$0] != nil }) else {
                return false
            }
            session.unacked[key] = nil
            session.info.unackedUpstream = session.unacked.count
            state.sessions[project.rowID]?[id] = session
            pump(project.rowID, &state)
            endIfDrained(session)
            return true
        }
    }

    // MARK: - Draining

    /// Drains one session of the project, or all of them: each gets `CONNECTION_DRAINING` (a
    /// session still logging in gets it once bound) and is closed when its work is done or
    /// `drainTimeout` has passed. Returns the ids drained.
    public func drain(project: Project, session only: String? = nil) -> [String] {
        let drained = state.withLock { state -> [String] in
            var drained: [String] = []
            for (id, var session) in state.sessions[project.rowID] ?? [:] where only == nil || only == id {
                guard !session.info.draining else { continue }
                session.info.draining = true
                state.sessions[project.rowID]?[id] = session
                drained.append(id)
                guard session.info.bound else { continue }
                session.outbox.send(.stanza(CCSWire.connectionDraining))
                endIfDrained(session)
            }
            return drained
        }
        scheduleDrainDeadline(drained, project: project)
        return drained.sorted()
    }

    /// At shutdown: no new sessions, and every session drained.
    func drainAll() {
        let projects = state.withLock { state -> [Project] in
            state.shuttingDown = true
            return state.sessions.values.compactMap { $0.values.first?.info.project }
        }
        for project in projects { _ = drain(project: project) }
    }

    private func scheduleDrainDeadline(_ ids: [String], project: Project) {
        guard !ids.isEmpty else { return }
        let timeout = limits.drainTimeout
        Task { [self] in
            try? await Task.sleep(for: timeout)
            let outboxes = state.withLock { state in ids.compactMap { state.sessions[project.rowID]?[$0]?.outbox } }
            for outbox in outboxes { outbox.abort(condition: nil) }
        }
    }

    // MARK: - Inside the lock

    private func endIfDrained(_ session: Session) {
        if session.info.draining && session.isIdle { session.outbox.send(.end) }
    }

    private func expireReceipts(_ project: Int64, _ state: inout State) {
        let cutoff = ContinuousClock.now - limits.receiptAckTimeout
        for (id, var session) in state.sessions[project] ?? [:]
        where session.receiptHead < session.receipts.count && session.receipts[session.receiptHead].sentAt < cutoff {
            session.expireReceipts(before: cutoff)
            state.sessions[project]?[id] = session
            endIfDrained(session)
        }
    }

    /// The session with the most room for upstream messages, `preferred` first when it has any.
    private func chooseSession(_ project: Int64, preferring preferred: String?, _ state: State) -> String? {
        let sessions = state.sessions[project] ?? [:]
        if let preferred, let session = sessions[preferred], session.room(limits.pendingPerConnection) > 0 {
            return preferred
        }
        guard let best = sessions.max(by: { $0.value.room(limits.pendingPerConnection) < $1.value.room(limits.pendingPerConnection) }),
            best.value.room(limits.pendingPerConnection) > 0
        else { return nil }
        return best.key
    }

    private func send(_ message: UpstreamMessage, to id: String, project: Int64, _ state: inout State) {
        guard var session = state.sessions[project]?[id] else { return }
        session.unacked[message.messageID] = (message, state.nextSequence)
        state.nextSequence += 1
        if message.isReceipt { session.receipts.append((message.messageID, .now)) }
        session.info.unackedUpstream = session.unacked.count
        session.outbox.send(.stanza(CCSWire.upstream(message.json, senderID: session.info.project.senderId)))
        state.sessions[project]?[id] = session
    }

    /// Hands waiting messages to sessions with room, oldest first, round robin: O(waiting + sessions).
    private func pump(_ project: Int64, _ state: inout State) {
        guard let waiting = state.waiting[project], !waiting.isEmpty else { return }
        expireReceipts(project, &state)
        var rooms = (state.sessions[project] ?? [:]).compactMap { id, session -> (String, Int)? in
            let room = session.room(limits.pendingPerConnection)
            return room > 0 ? (id, room) : nil
        }
        var turn = 0
        while !rooms.isEmpty, let next = state.waiting[project]?.popFirst() {
            turn %= rooms.count
            send(next, to: rooms[turn].0, project: project, &state)
            rooms[turn].1 -= 1
            if rooms[turn].1 == 0 { rooms.remove(at: turn) } else { turn += 1 }
        }
        if state.waiting[project]?.isEmpty == true { state.waiting[project] = nil }
    }
}
