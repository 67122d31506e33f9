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
struct UpstreamMessage: Sendable {
    var messageID: String
    /// The `<gcm>` JSON, as the app server reads it.
    var json: String
    var isReceipt: Bool
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
    struct Limits: Sendable {
        /// Downstream messages awaiting their ack or nack, and upstream ones awaiting the app
        /// server's ack, on one connection (FCM's 100).
        var pendingPerConnection = 100
        var connectionsPerProject = 1000
        var waitingPerProject = 10_000
        var drainTimeout = Duration.seconds(10)
        /// An unacknowledged receipt stops counting against the connection after this long:
        /// some clients never acknowledge receipts.
        var receiptAckTimeout = Duration.seconds(30)
    }

    /// One connected, authenticated session.
    struct SessionInfo: Sendable {
        var id: String
        var project: Project
        var jid: String
        var connectedAt: Date
        var draining: Bool
        /// Bound a resource: upstream messages may go to it.
        var bound: Bool
        var pendingDownstream: Int
        var unackedUpstream: Int
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
    enum UpstreamDelivery: Sendable, Equatable {
        case sent(connection: String)
        case waiting(position: Int)
        case queueFull
    }

    private struct Session {
        var info: SessionInfo
        let outbox: XMPPOutbox
        /// By message id, with when each was sent.
        var unacked: [String: (message: UpstreamMessage, sentAt: ContinuousClock.Instant)] = [:]
        var order: [String] = []
    }

    private struct State {
        var sessions: [Int64: [String: Session]] = [:]
        var waiting: [Int64: [UpstreamMessage]] = [:]
        var nextID = 1
        var shuttingDown = false
    }

    let limits: Limits
    private let state = Mutex(State())

    init(limits: Limits = Limits()) {
        self.limits = limits
    }

    /// A hub with `serve`'s limits; drained sessions get the shutdown deadline to finish.
    public convenience init(configuration: ServerConfiguration) {
        var limits = Limits()
        limits.pendingPerConnection = configuration.xmppPending
        limits.connectionsPerProject = configuration.xmppConnectionsPerProject
        limits.waitingPerProject = configuration.xmppWaitingUpstream
        limits.drainTimeout = configuration.shutdownDeadline
        self.init(limits: limits)
    }

    // MARK: - Sessions

    func register(project: Project, jid: String, outbox: XMPPOutbox) -> Registration {
        state.withLock { state in
            guard !state.shuttingDown else { return .shuttingDown }
            let sessions = state.sessions[project.rowID, default: [:]]
            guard sessions.count < limits.connectionsPerProject else { return .tooManyConnections }
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
    /// upstream messages (before, they would arrive in the middle of the stream restart).
    func bind(_ id: String, project: Project, jid: String) {
        state.withLock { state in
            state.sessions[project.rowID]?[id]?.info.jid = jid
            state.sessions[project.rowID]?[id]?.info.bound = true
            pump(project.rowID, &state)
        }
    }

    /// Forgets a session whose connection ended; what it left unacknowledged goes to another.
    func remove(_ id: String, project: Project) {
        state.withLock { state in
            guard let session = state.sessions[project.rowID]?.removeValue(forKey: id) else { return }
            if state.sessions[project.rowID]?.isEmpty == true { state.sessions[project.rowID] = nil }
            let returned = session.order.compactMap { session.unacked[$0]?.message }
            if !returned.isEmpty {
                state.waiting[project.rowID, default: []].insert(contentsOf: returned, at: 0)
            }
            pump(project.rowID, &state)
        }
    }

    func sessions(of project: Project) -> [SessionInfo] {
        state.withLock { state in
            (state.sessions[project.rowID] ?? [:]).values.map(\.info).sorted { $0.connectedAt < $1.connectedAt }
        }
    }

    func waitingCount(of project: Project) -> Int {
        state.withLock { $0.waiting[project.rowID]?.count ?? 0 }
    }

    var waitingCount: Int {
        state.withLock { $0.waiting.values.reduce(0) { $0 + $1.count } }
    }

    var sessionCount: Int {
        state.withLock { $0.sessions.values.reduce(0) { $0 + $1.count } }
    }

    // MARK: - Downstream

    /// Counts a downstream message against the connection, unless it is draining or full.
    func admitDownstream(_ id: String, project: Project) -> DownstreamAdmission {
        state.withLock { state in
            guard let session = state.sessions[project.rowID]?[id] else { return .draining }
            if session.info.draining { return .draining }
            guard session.info.pendingDownstream + session.unacked.count < limits.pendingPerConnection else {
                return .tooManyPending
            }
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
    func deliver(_ message: UpstreamMessage, to project: Project, preferring preferred: String? = nil)
        -> UpstreamDelivery
    {
        state.withLock { state in
            expireReceipts(project.rowID, &state)
            if let target = chooseSession(project.rowID, preferring: preferred, state) {
                send(message, to: target, project: project.rowID, &state)
                return .sent(connection: target)
            }
            let waiting = state.waiting[project.rowID, default: []]
            guard waiting.count < limits.waitingPerProject else { return .queueFull }
            state.waiting[project.rowID, default: []].append(message)
            return .waiting(position: waiting.count + 1)
        }
    }

    /// The app server's ack of an upstream message or receipt; receipts may be acknowledged with or
    /// without their `dr2:` prefix. `false` when the connection has no such message unacknowledged.
    @discardableResult
    func acknowledge(_ messageID: String, session id: String, project: Project) -> Bool {
        state.withLock { state in
            guard var session = state.sessions[project.rowID]?[id] else { return false }
            let key = [messageID, "dr2:" + messageID].first { session.unacked[$0] != nil }
            guard let key else { return false }
            session.unacked[key] = nil
            session.order.removeAll { $0 == key }
            session.info.unackedUpstream = session.unacked.count
            state.sessions[project.rowID]?[id] = session
            pump(project.rowID, &state)
            if let session = state.sessions[project.rowID]?[id] { endIfDrained(session) }
            return true
        }
    }

    // MARK: - Draining

    /// Drains one session of the project, or all of them: each gets `CONNECTION_DRAINING` and is
    /// closed when its work is done or `drainTimeout` has passed. Returns the ids drained.
    func drain(project: Project, session only: String? = nil) -> [String] {
        let drained = state.withLock { state -> [String] in
            var drained: [String] = []
            for (id, session) in state.sessions[project.rowID] ?? [:] where only == nil || only == id {
                guard !session.info.draining else { continue }
                state.sessions[project.rowID]?[id]?.info.draining = true
                session.outbox.send(.stanza(CCSWire.connectionDraining))
                drained.append(id)
                if let session = state.sessions[project.rowID]?[id] { endIfDrained(session) }
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
            state.withLock { state in
                for id in ids { state.sessions[project.rowID]?[id]?.outbox.send(.end) }
            }
        }
    }

    // MARK: - Inside the lock

    private func endIfDrained(_ session: Session) {
        if session.info.draining && session.info.pendingDownstream == 0 && session.unacked.isEmpty {
            session.outbox.send(.end)
        }
    }

    /// The non-draining session with the most room, `preferred` first when it has any.
    private func chooseSession(_ project: Int64, preferring preferred: String?, _ state: State) -> String? {
        let sessions = state.sessions[project] ?? [:]
        func room(_ session: Session) -> Int {
            session.info.draining || !session.info.bound
                ? 0 : limits.pendingPerConnection - session.unacked.count - session.info.pendingDownstream
        }
        if let preferred, let session = sessions[preferred], room(session) > 0 { return preferred }
        return sessions.max { room($0.value) < room($1.value) }.flatMap { room($0.value) > 0 ? $0.key : nil }
    }

    private func send(_ message: UpstreamMessage, to id: String, project: Int64, _ state: inout State) {
        guard var session = state.sessions[project]?[id] else { return }
        if session.unacked[message.messageID] == nil { session.order.append(message.messageID) }
        session.unacked[message.messageID] = (message, .now)
        session.info.unackedUpstream = session.unacked.count
        session.outbox.send(.stanza(CCSWire.upstream(message.json, senderID: session.info.project.senderId)))
        state.sessions[project]?[id] = session
    }

    /// Hands waiting messages to sessions with room, oldest first.
    private func pump(_ project: Int64, _ state: inout State) {
        guard state.waiting[project] != nil else { return }
        expireReceipts(project, &state)
        while let next = state.waiting[project]?.first, let target = chooseSession(project, preferring: nil, state) {
            state.waiting[project]?.removeFirst()
            send(next, to: target, project: project, &state)
        }
        if state.waiting[project]?.isEmpty == true { state.waiting[project] = nil }
    }

    /// Receipts left unacknowledged past `receiptAckTimeout` stop taking room.
    private func expireReceipts(_ project: Int64, _ state: inout State) {
        let cutoff = ContinuousClock.now - limits.receiptAckTimeout
        for (id, var session) in state.sessions[project] ?? [:] {
            let expired = Set(session.unacked.filter { $0.value.message.isReceipt && $0.value.sentAt < cutoff }.keys)
            guard !expired.isEmpty else { continue }
            for key in expired { session.unacked[key] = nil }
            session.order.removeAll { expired.contains($0) }
            session.info.unackedUpstream = session.unacked.count
            state.sessions[project]?[id] = session
        }
    }
}
