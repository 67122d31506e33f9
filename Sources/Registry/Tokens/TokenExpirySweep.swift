import AudienceEngine
import Foundation

/// The expiry sweep: a registered token not seen (`lastSeenAt`, else `updatedAt`) for longer than
/// its project's `expireAfter` is unregistered exactly as FCM's `UNREGISTERED` answer unregisters
/// it (it leaves its topics and groups; a group or topic it empties is deleted), counted as
/// pruned, with a `token.unregistered` webhook event whose reason is `EXPIRED`, and one audit
/// entry (`tokens.expired`) per round with the count.
///
/// Rounds are claimed per project with a compare-and-set on the project's row (`claimTokenSweep`):
/// at most one round per `roundInterval` across every server on the database; a policy change
/// clears the claim, so the next tick runs a round under it. A round unregisters `batchSize`
/// tokens per transaction, each re-checked in it (a token seen since it was read stays).
public struct TokenExpirySweep: Sendable {
    public let registry: RegistryService
    /// How often a project's round may run: at least hourly.
    public var roundInterval: Duration
    /// Tokens unregistered in one transaction: short enough never to hold the writer for long.
    public var batchSize: Int
    /// What a server's looks in its first minute pass as `claimedWithin`. A round renews its claim
    /// after every batch, so one claimed this recently is running on another server; an older claim
    /// is a finished round, or one a crash or a stop cut short, and is run again.
    public static let startUpWindow = Duration.seconds(15)

    public init(registry: RegistryService, roundInterval: Duration = .seconds(3_600), batchSize: Int = 500) {
        (self.registry, self.roundInterval, self.batchSize) = (registry, roundInterval, batchSize)
    }

    /// One round's outcome in a project.
    public struct Round: Sendable, Hashable {
        public var project: String
        public var expired: Int

        public init(project: String, expired: Int) {
            (self.project, self.expired) = (project, expired)
        }
    }

    /// Runs a round in each project with expiry whose round is due at `now` and not claimed by
    /// another server; returns the rounds this call ran.
    /// - Parameter window: a round claimed within it is not run again; `roundInterval` unless
    ///   given. A server's looks in its first minute give `startUpWindow`, so that a round a crash
    ///   cut short (its hour claimed, its tokens half swept) is finished within a minute of a
    ///   server starting, not an hour later.
    public func runDueRounds(now: Date = Date(), claimedWithin window: Duration? = nil) async throws -> [Round] {
        var rounds: [Round] = []
        for project in try await registry.store.projects() {
            let policy = try await registry.store.tokenPolicy(of: project)
            guard let cutoff = policy.expiryCutoff(now: now) else { continue }
            let since = now.addingTimeInterval(-(window ?? roundInterval).seconds)
            guard try await registry.store.claimTokenSweep(of: project, at: now, unlessClaimedSince: since) else {
                continue
            }
            rounds.append(
                Round(project: project.projectId, expired: try await expire(in: project, before: cutoff, now: now)))
        }
        return rounds
    }

    /// Unregisters the project's registered tokens last seen before `cutoff`, a batch per
    /// transaction; returns how many.
    func expire(in project: Project, before cutoff: Date, now: Date) async throws -> Int {
        var total = 0
        do {
            total = try await expireBatches(in: project, before: cutoff, now: now)
        } catch {
            // A stop cut the round short: its claim is given up, so that the next server to look
            // (this one restarted, or another) finishes it. Written on a task the stop does not cancel.
            if Task.isCancelled {
                let store = registry.store
                await Task.detached {
                    _ = try? await store.claimTokenSweep(
                        of: project, at: Date(timeIntervalSince1970: 0), unlessClaimedSince: .distantFuture)
                }.value
            }
            throw error
        }
        if total > 0 {
            try await registry.recordAudit(
                registry.audit(
                    .tokensExpired, target: project.projectId, details: ["count": "\(total)"], by: .server,
                    project: project.rowID, now: now))
        }
        return total
    }

    /// The batches of a round, each in its own transaction, the claim renewed after each (a claim
    /// renewed within `startUpWindow` is a round running); returns how many tokens they unregistered.
    private func expireBatches(in project: Project, before cutoff: Date, now: Date) async throws -> Int {
        var total = 0
        while true {
            let tokens = try await registry.store.registeredTokens(
                lastSeenBefore: cutoff, in: project, limit: batchSize)
            guard !tokens.isEmpty else { break }
            let expired = registry.applied(
                try await registry.store.expireTokens(tokens, lastSeenBefore: cutoff, in: project, now: now))
            if expired > 0 { try await registry.outbox.countPruned(project: project.rowID, tokens: expired) }
            total += expired
            // Every token read was seen since, or a batch short of the size was the last.
            if expired == 0 || tokens.count < batchSize { break }
            _ = try await registry.store.claimTokenSweep(of: project, at: Date(), unlessClaimedSince: .distantFuture)
        }
        return total
    }
}

extension RegistryWriting {
    /// Unregisters those of `tokens` still registered and last seen before `cutoff`, in one
    /// transaction, as `unregisterToken` does one: each leaves its topics and groups (removing those
    /// it empties); their `token.unregistered` webhook events (reason `EXPIRED`) are queued in the
    /// same transaction. Rows are held tokens first (sorted), then each one's topics and groups.
    /// - Returns: how many it unregistered.
    func expireTokens(_ tokens: [String], lastSeenBefore cutoff: Date, in project: Project, now: Date) async throws
        -> Committed<Int>
    {
        try await writing { driver, log in
            let sorted = Array(Set(tokens)).sorted()
            let rows = try await driver.tokens(sorted, in: project.rowID)
            let infos = try await driver.tokenInfos(sorted, in: project.rowID)
            let at = EpochMilliseconds.milliseconds(now)
            var expired: [(token: String, id: Int64)] = []
            for token in sorted {
                guard let row = rows[token], row.state == .registered, let info = infos[token],
                    info.lastSeenAt < cutoff
                else { continue }
                expired.append((token, row.id))
            }
            for (_, id) in expired {
                try await driver.setState(.unregistered, ofToken: id, at: at)
                for topic in try await driver.leaveTopics(id) {
                    try await driver.deleteTopicIfEmpty(topic.id)
                    log.record(.unsubscribed(project: project.rowID, topic: topic.name, tokens: [UInt32(id)]))
                }
                try await driver.deleteGroupsEmptied(try await driver.leaveGroups(id))
            }
            guard !expired.isEmpty else { return 0 }
            log.record(.unregistered(project: project.rowID, tokens: expired.map { UInt32($0.id) }.sorted()))
            try await driver.queueWebhookEvents(
                WebhookEventBatch(expired: expired.map(\.token), now: at), project: project.rowID)
            return expired.count
        }
    }
}
