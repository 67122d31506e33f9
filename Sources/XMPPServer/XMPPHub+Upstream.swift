import Foundation
import Logging
import Registry
import ServiceLifecycle
import Synchronization

/// Whether this server's claiming task runs, and who waits for its next round.
struct PumpState {
    var running = false
    /// Rung while a round ran: go round again.
    var again = false
    /// Callers that go on once a round that began after their call has ended.
    var waiting: [CheckedContinuation<Void, Never>] = []
    /// Sessions chosen for messages by id (a receipt, for the connection that asked for it), set
    /// before the message is added, so that whichever round claims it knows.
    var preferred: [String: String] = [:]
}

/// Upstream messages through the store, to the project's XMPP sessions on any server.
///
/// A message is added to the store, then this server claims waiting messages for its own sessions
/// with room. Other servers claim it on their next poll, or when room opens in one of their
/// sessions. Claims run in rounds on one task per server, never on a caller's (a cancelled caller
/// cannot leave a claim half done): a round never takes more than the room its sessions have, and
/// a caller waits at most for the round after the one under way.
extension XMPPHub: Service {
    /// Adds an upstream message or receipt, then waits for a claim round (`preferring` one
    /// session for it, a receipt's, when that session has room).
    /// - Returns: the connection it went to; or that it waits (for a session here or on another
    ///   server) with how many of the project's; or that `waitingPerProject` already wait.
    public func deliver(_ message: UpstreamMessage, to project: Project, preferring preferred: String?) async throws
        -> UpstreamDelivery
    {
        if let preferred { pumping.withLock { $0.preferred[message.messageID] = preferred } }
        defer { if preferred != nil { pumping.withLock { _ = $0.preferred.removeValue(forKey: message.messageID) } } }
        guard let row = try await registry.addUpstream(message, to: project, limit: limits.waitingPerProject)
        else { return .queueFull }
        await claimRound()
        if let connection = connection(holding: row, messageID: message.messageID, project: project.rowID) {
            return .sent(connection: connection)
        }
        return .waiting(position: try await registry.waitingUpstream(in: project))
    }

    /// How many of the project's upstream messages wait for a session, on every server.
    public func waitingCount(of project: Project) async throws -> Int {
        try await registry.waitingUpstream(in: project)
    }

    /// How many upstream messages wait, every project's.
    public func waitingCount() async throws -> Int {
        try await registry.waitingUpstream(in: nil)
    }

    /// Asks for a claim round and returns once one that began after the call has ended.
    func claimRound() async {
        await withCheckedContinuation { continuation in
            let starts = pumping.withLock { state in
                state.waiting.append(continuation)
                guard !state.running else { return false }
                state.running = true
                return true
            }
            if starts { Task { await self.claimRounds() } }
        }
    }

    /// Asks for a claim round without waiting for it: room may have opened.
    func ringForRoom() {
        let starts = pumping.withLock { state in
            state.again = true
            guard !state.running else { return false }
            state.running = true
            return true
        }
        if starts { Task { await claimRounds() } }
    }

    /// The claiming task: rounds until nobody asked for another, each resuming those who waited
    /// for it.
    private func claimRounds() async {
        while true {
            let waiters = pumping.withLock { state -> [CheckedContinuation<Void, Never>]? in
                guard state.again || !state.waiting.isEmpty else {
                    state.running = false
                    return nil
                }
                state.again = false
                defer { state.waiting = [] }
                return state.waiting
            }
            guard let waiters else { return }
            do {
                try await claim()
            } catch {
                logger.warning(
                    "xmpp upstream messages not claimed", metadata: ["error": "\(String(describing: error).prefix(200))"])
            }
            for waiter in waiters { waiter.resume() }
        }
    }

    /// One round: expired receipts leave the store, waiting messages fill the room there is,
    /// and those no session could take after all go back.
    private func claim() async throws {
        let expired = expireReceipts()
        if !expired.isEmpty { try await registry.removeUpstream(expired) }
        let room = upstreamRoom()
        guard !room.isEmpty else { return }
        let held = try await registry.claimUpstream(room: room, holder: holder, lease: limits.upstreamLease)
        guard !held.isEmpty else { return }
        let placement = place(held, preferring: pumping.withLock { $0.preferred })
        if !placement.superseded.isEmpty { try await registry.removeUpstream(placement.superseded) }
        if !placement.unplaced.isEmpty { try await registry.releaseUpstream(placement.unplaced, holder: holder) }
    }

    /// Messages a session ended without acknowledging go back to wait, then to whichever session
    /// has room first. Should that fail, this server stops renewing them and they lapse.
    func handBack(_ rows: [Int64]) async {
        do {
            try await registry.releaseUpstream(rows, holder: holder)
        } catch {
            logger.warning("xmpp upstream messages not handed back", metadata: ["error": "\(String(describing: error).prefix(200))"])
        }
        ringForRoom()
    }

    /// An acknowledged message leaves the store, and its room goes to what waits. Should that
    /// fail, the row lapses and comes again: at least once, as upstream messages are.
    func settle(_ row: Int64) async {
        do {
            try await registry.removeUpstream([row])
        } catch {
            logger.warning("xmpp acknowledged message not removed", metadata: ["error": "\(String(describing: error).prefix(200))"])
        }
        ringForRoom()
    }

    /// Until shutdown, every `upstreamPollInterval`: drops expired receipts, looks for messages
    /// other servers added while a session has room, and, a few times per lease, renews the
    /// claims of the messages its sessions hold unacknowledged.
    public func run() async throws {
        await cancelWhenGracefulShutdown {
            var renewed = ContinuousClock.now
            while !Task.isCancelled {
                try? await Task.sleep(for: self.limits.upstreamPollInterval)
                let expired = self.expireReceipts()
                if !expired.isEmpty { try? await self.registry.removeUpstream(expired) }
                if self.hasRoom, (try? await self.registry.waitingUpstream(in: nil)) ?? 0 > 0 {
                    self.ringForRoom()
                }
                if ContinuousClock.now - renewed > self.limits.upstreamLease / 3 {
                    renewed = .now
                    do {
                        try await self.registry.renewUpstream(
                            self.heldRows(), holder: self.holder, lease: self.limits.upstreamLease)
                    } catch {
                        self.logger.warning(
                            "xmpp upstream claims not renewed", metadata: ["error": "\(String(describing: error).prefix(200))"])
                    }
                }
            }
        }
    }
}
