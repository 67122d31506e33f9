import Foundation
import Logging
import Registry
import ServiceLifecycle
import Synchronization

/// Whether this server is claiming waiting upstream messages, and who waits for the next claim.
struct PumpState {
    var running = false
    /// Asked for while a claim ran: claim again once it ends.
    var again = false
    /// Callers that go on once a claim that began after their call has ended.
    var waiting: [CheckedContinuation<Bool, Never>] = []
    /// Rows `deliver` asked about, and the connection each went to once placed.
    var watched: [Int64: String?] = [:]
}

/// Upstream messages through the store, to the project's XMPP sessions on any server.
///
/// A message is added to the store, then this server claims waiting messages for its own sessions
/// with room ("pumps"). Other servers claim it on their next poll, or when room opens in one of
/// their sessions. One claim runs at a time per server, so a server never claims more than its
/// sessions' room; a pump asked for while one runs waits for the next round, which sees its message.
extension XMPPHub: Service {
    /// Adds an upstream message or receipt, then claims waiting messages for this server's
    /// sessions (`preferring` one, for a receipt, when it has room).
    /// - Returns: the connection it went to; or that it waits (for a session here or on another
    ///   server) with how many of the project's; or that `waitingPerProject` already wait.
    public func deliver(_ message: UpstreamMessage, to project: Project, preferring preferred: String? = nil) async throws
        -> UpstreamDelivery
    {
        guard let row = try await store.addUpstream(
            message, project: project.rowID, limit: limits.waitingPerProject, now: Date())
        else { return .queueFull }
        pumping.withLock { $0.watched[row] = .some(nil) }
        await pump(preferring: preferred)
        if let connection = pumping.withLock({ $0.watched.removeValue(forKey: row) }) ?? nil {
            return .sent(connection: connection)
        }
        return .waiting(position: try await store.waitingUpstream(project: project.rowID, now: Date()))
    }

    /// How many of the project's upstream messages wait for a session, on every server.
    public func waitingCount(of project: Project) async throws -> Int {
        try await store.waitingUpstream(project: project.rowID, now: Date())
    }

    /// How many upstream messages wait, every project's.
    public func waitingCount() async throws -> Int {
        try await store.waitingUpstream(project: nil, now: Date())
    }

    /// Claims waiting messages for the sessions with room and sends them; returns once a claim
    /// that began after the call has ended.
    func pump(preferring preferred: String? = nil) async {
        while true {
            let runs = pumping.withLock { state in
                if state.running {
                    state.again = true
                    return false
                }
                state.running = true
                return true
            }
            if runs { return await claimRounds(preferring: preferred) }
            let queued = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let queued = pumping.withLock { state in
                    guard state.running else { return false }
                    state.waiting.append(continuation)
                    return true
                }
                if !queued { continuation.resume(returning: false) }
            }
            // Queued: a later round ran. Not queued: the claim ended meanwhile; run one.
            if queued { return }
        }
    }

    /// Claims until no one asked for another round, resuming those who waited for each.
    private func claimRounds(preferring preferred: String?) async {
        var waiters: [CheckedContinuation<Bool, Never>] = []
        while true {
            do {
                try await claimRound(preferring: preferred)
            } catch {
                logger.warning(
                    "xmpp upstream messages not claimed", metadata: ["error": "\(String(describing: error).prefix(200))"])
            }
            for waiter in waiters { waiter.resume(returning: true) }
            let next = pumping.withLock { state -> [CheckedContinuation<Bool, Never>]? in
                guard state.again || !state.waiting.isEmpty else {
                    state.running = false
                    return nil
                }
                state.again = false
                defer { state.waiting = [] }
                return state.waiting
            }
            guard let next else { return }
            waiters = next
        }
    }

    /// One claim: expired receipts leave the store, waiting messages fill the room there is, and
    /// those no session could take after all go back.
    private func claimRound(preferring preferred: String?) async throws {
        let (room, expired) = upstreamRoom()
        if !expired.isEmpty { try await store.removeUpstream(expired) }
        guard !room.isEmpty else { return }
        let now = Date()
        let held = try await store.claimUpstream(room: room, holder: holder, leaseUntil: leaseEnd(from: now), now: now)
        guard !held.isEmpty else { return }
        let placed = place(held, preferring: preferred)
        pumping.withLock { state in
            for (row, connection) in placed.sent where state.watched[row] != nil { state.watched[row] = connection }
        }
        if !placed.unplaced.isEmpty { try await store.releaseUpstream(placed.unplaced) }
    }

    /// Room may have opened: claim what waits, without holding up the caller.
    func ringForRoom() {
        Task { await pump() }
    }

    /// Messages a session ended without acknowledging go back to wait, then to whichever session
    /// has room first.
    func handBack(_ rows: [Int64]) async {
        do {
            try await store.releaseUpstream(rows)
        } catch {
            // Their lease runs out instead, and then they are claimed again.
            logger.warning("xmpp upstream messages not handed back", metadata: ["error": "\(String(describing: error).prefix(200))"])
        }
        await pump()
    }

    /// An acknowledged message leaves the store, and its room goes to what waits.
    func settle(_ row: Int64) async {
        do {
            try await store.removeUpstream([row])
        } catch {
            logger.warning("xmpp acknowledged message not removed", metadata: ["error": "\(String(describing: error).prefix(200))"])
        }
        await pump()
    }

    /// Looks for messages other servers added every `upstreamPollInterval` while a session has
    /// room, and renews this server's claims a few times per lease, until shutdown.
    public func run() async throws {
        await cancelWhenGracefulShutdown {
            var renewed = ContinuousClock.now
            while !Task.isCancelled {
                try? await Task.sleep(for: self.limits.upstreamPollInterval)
                if self.hasRoom, (try? await self.store.waitingUpstream(project: nil, now: Date())) ?? 0 > 0 {
                    await self.pump()
                }
                if ContinuousClock.now - renewed > self.limits.upstreamLease / 3 {
                    renewed = .now
                    do {
                        try await self.store.renewUpstream(holder: self.holder, leaseUntil: self.leaseEnd(from: Date()))
                    } catch {
                        self.logger.warning(
                            "xmpp upstream claims not renewed", metadata: ["error": "\(String(describing: error).prefix(200))"])
                    }
                }
            }
        }
    }

    /// When a claim made at `now` runs out.
    private func leaseEnd(from now: Date) -> Date {
        let (seconds, attoseconds) = limits.upstreamLease.components
        return now.addingTimeInterval(TimeInterval(seconds) + TimeInterval(attoseconds) / 1e18)
    }
}
