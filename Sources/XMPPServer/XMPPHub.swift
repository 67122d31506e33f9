import Foundation
import Logging
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

/// Every XMPP session of every project, and the upstream traffic between emulated devices and
/// them (XMPP reference §5.3–§5.5, §6).
///
/// - Upstream messages wait in the store (`UpstreamStore`), at most `waitingPerProject` per
///   project, until a session of the project that is not draining and has fewer than
///   `pendingPerConnection` unacknowledged takes them, on whichever server holds it: each server
///   claims waiting messages for its sessions when one is added, when room opens, and every
///   `upstreamPollInterval` (for those added on other servers). See `XMPPHub+Upstream.swift`.
/// - What a session leaves unacknowledged when it ends is handed back and delivered again to
///   another session; what a dead server held is, once its lease has run out.
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
        /// How often a server with room in its sessions looks for upstream messages other servers added.
        public var upstreamPollInterval = Duration.milliseconds(100)
        /// How long a server holds an unacknowledged upstream message without renewing its claim;
        /// past it (the server died) another server's session takes the message.
        public var upstreamLease = Duration.seconds(30)

        public init() {}
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

    private struct Session {
        var info: AppServerSession
        let outbox: XMPPOutbox
        /// Upstream messages and receipts sent and not yet acknowledged, by message id, with their
        /// rows in the store.
        var unacked: [String: HeldUpstream] = [:]
        /// Receipts by when they were sent, oldest first from `receiptHead`; acknowledged ones are
        /// skipped as they come up.
        var receipts: [(id: String, sentAt: ContinuousClock.Instant)] = []
        var receiptHead = 0

        var isIdle: Bool { info.pendingDownstream == 0 && unacked.isEmpty }

        /// Room for upstream messages.
        func room(_ limit: Int) -> Int {
            info.draining || !info.bound ? 0 : limit - unacked.count
        }

        /// Receipts unacknowledged since before `cutoff` stop taking room, and are dropped from
        /// the store as if acknowledged; amortized O(1).
        mutating func expireReceipts(before cutoff: ContinuousClock.Instant, into expired: inout [Int64]) {
            while receiptHead < receipts.count && receipts[receiptHead].sentAt < cutoff {
                let id = receipts[receiptHead].id
                if let held = unacked[id], held.message.isReceipt {
                    unacked[id] = nil
                    expired.append(held.id)
                }
                receiptHead += 1
            }
            if receiptHead > 64 && receiptHead * 2 > receipts.count {
                receipts.removeFirst(receiptHead)
                receiptHead = 0
            }
            info.unackedUpstream = unacked.count
        }
    }

    private struct State {
        var sessions: [Int64: [String: Session]] = [:]
        var nextID = 1
        var shuttingDown = false
    }

    public let limits: Limits
    /// Where upstream messages wait and which server holds them, through the registry's
    /// `RegistryService+Upstream` (the hub never reaches the store itself).
    let registry: RegistryService
    /// This server, as the holder of the messages its sessions were sent.
    let holder = "xmpp-" + UUID().uuidString.lowercased()
    private let state = Mutex(State())
    /// Claim rounds: one task at a time per server (see `claimRound`).
    let pumping = Mutex(PumpState())
    let logger: Logger
    /// The clock receipts' ages are read from: the system's, or a test's that it moves itself.
    let now: @Sendable () -> ContinuousClock.Instant

    public init(
        limits: Limits = Limits(), registry: RegistryService, logger: Logger = Logger(label: "fcm-registry.xmpp"),
        now: @escaping @Sendable () -> ContinuousClock.Instant = { .now }
    ) {
        self.limits = limits
        self.registry = registry
        self.logger = logger
        self.now = now
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
                info: AppServerSession(
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
            }
        }
        ringForRoom()
    }

    /// Forgets a session whose connection ended; what it left unacknowledged is handed back, to
    /// go to another session (first in line, by its age).
    func remove(_ id: String, project: Project) {
        let returned = state.withLock { state -> [Int64] in
            guard let session = state.sessions[project.rowID]?.removeValue(forKey: id) else { return [] }
            if state.sessions[project.rowID]?.isEmpty == true { state.sessions[project.rowID] = nil }
            return session.unacked.values.map(\.id)
        }
        guard !returned.isEmpty else { return }
        Task { await handBack(returned) }
    }

    public func sessions(of project: Project) -> [AppServerSession] {
        state.withLock { state in
            (state.sessions[project.rowID] ?? [:]).values.map(\.info).sorted { $0.connectedAt < $1.connectedAt }
        }
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

    /// The app server's ack of an upstream message or receipt; receipts may be acknowledged with or
    /// without their `dr2:` prefix. `false` when the connection has no such message unacknowledged.
    /// The acknowledged message leaves the store.
    @discardableResult
    func acknowledge(_ messageID: String, session id: String, project: Project) -> Bool {
        let acknowledged = state.withLock { state -> Int64? in
            guard var session = state.sessions[project.rowID]?[id] else { return nil }
            guard let key = [messageID, "dr2:" + messageID].first(where: { session.unacked[$0] != nil }),
                let held = session.unacked.removeValue(forKey: key)
            else { return nil }
            session.info.unackedUpstream = session.unacked.count
            state.sessions[project.rowID]?[id] = session
            endIfDrained(session)
            return held.id
        }
        guard let acknowledged else { return false }
        Task { await settle(acknowledged) }
        return true
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

    private func expireReceipts(_ project: Int64, _ state: inout State, into expired: inout [Int64]) {
        let cutoff = now() - limits.receiptAckTimeout
        for (id, var session) in state.sessions[project] ?? [:]
        where session.receiptHead < session.receipts.count && session.receipts[session.receiptHead].sentAt < cutoff {
            session.expireReceipts(before: cutoff, into: &expired)
            state.sessions[project]?[id] = session
            endIfDrained(session)
        }
    }

    /// Sends a claimed message to the session. A message whose id the session already holds
    /// unacknowledged takes the earlier one's place (one ack settles an id): the earlier row is
    /// returned, to leave the store.
    private func send(_ held: HeldUpstream, to id: String, _ state: inout State) -> Int64? {
        guard var session = state.sessions[held.project]?[id] else { return nil }
        // The same row again (its lease ran out before this server renewed it) is no other message.
        let superseded = session.unacked.updateValue(held, forKey: held.message.messageID).map(\.id).flatMap {
            $0 == held.id ? nil : $0
        }
        if held.message.isReceipt { session.receipts.append((held.message.messageID, now())) }
        session.info.unackedUpstream = session.unacked.count
        session.outbox.send(.stanza(CCSWire.upstream(held.message.json, senderID: session.info.project.senderId)))
        state.sessions[held.project]?[id] = session
        return superseded
    }

    // MARK: - Room and placing, for the claims of XMPPHub+Upstream.swift

    /// Room for upstream messages, by project: sessions that are bound, not draining, and have
    /// fewer than `pendingPerConnection` unacknowledged.
    func upstreamRoom() -> [Int64: Int] {
        state.withLock { state in
            var room: [Int64: Int] = [:]
            for (project, sessions) in state.sessions {
                let total = sessions.values.reduce(0) { $0 + $1.room(limits.pendingPerConnection) }
                if total > 0 { room[project] = total }
            }
            return room
        }
    }

    /// Drops receipts unacknowledged for `receiptAckTimeout` from their sessions (some clients
    /// never acknowledge receipts); their rows are returned, to leave the store as if acknowledged.
    func expireReceipts() -> [Int64] {
        state.withLock { state in
            var expired: [Int64] = []
            for project in Array(state.sessions.keys) { expireReceipts(project, &state, into: &expired) }
            return expired
        }
    }

    /// Where claimed messages went.
    struct Placement {
        /// The connection each message went to, by row.
        var sent: [Int64: String] = [:]
        /// Rows no session could take (it ended, or filled, since the room was counted): to hand back.
        var unplaced: [Int64] = []
        /// Rows whose place a message with the same id took: to delete.
        var superseded: [Int64] = []
    }

    /// Sends claimed messages to sessions with room, oldest first: a message with a preferred
    /// session (by message id) goes there when it has room, the others round robin from the
    /// session with the most room. O(messages + sessions log sessions).
    func place(_ held: [HeldUpstream], preferring preferred: [String: String]) -> Placement {
        state.withLock { state in
            var placement = Placement()
            for (project, messages) in Dictionary(grouping: held, by: \.project) {
                var rooms = (state.sessions[project] ?? [:]).compactMap { id, session -> (String, Int)? in
                    let room = session.room(limits.pendingPerConnection)
                    return room > 0 ? (id, room) : nil
                }.sorted { $0.1 != $1.1 ? $0.1 > $1.1 : $0.0 < $1.0 }
                var turn = 0
                for message in messages.sorted(by: { $0.id < $1.id }) {
                    guard !rooms.isEmpty else {
                        placement.unplaced.append(message.id)
                        continue
                    }
                    var index = turn % rooms.count
                    if let wanted = preferred[message.message.messageID], let at = rooms.firstIndex(where: { $0.0 == wanted }) {
                        index = at
                    } else {
                        turn = index + 1
                    }
                    if let superseded = send(message, to: rooms[index].0, &state) { placement.superseded.append(superseded) }
                    placement.sent[message.id] = rooms[index].0
                    rooms[index].1 -= 1
                    if rooms[index].1 == 0 {
                        rooms.remove(at: index)
                        if index < turn { turn -= 1 }
                    }
                }
            }
            return placement
        }
    }

    /// The connection that holds the project's message `messageID` in row `row`, if one does.
    func connection(holding row: Int64, messageID: String, project: Int64) -> String? {
        state.withLock { state in
            state.sessions[project]?.first { $0.value.unacked[messageID]?.id == row }?.key
        }
    }

    /// The rows this server's sessions hold unacknowledged: the claims to renew.
    func heldRows() -> [Int64] {
        state.withLock { state in state.sessions.values.flatMap { $0.values.flatMap { $0.unacked.values.map(\.id) } } }
    }

    /// Whether any session has room: worth looking for messages other servers added.
    var hasRoom: Bool {
        state.withLock { state in
            state.sessions.values.contains { $0.values.contains { $0.room(limits.pendingPerConnection) > 0 } }
        }
    }
}
