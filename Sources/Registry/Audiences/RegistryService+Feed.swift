import AudienceEngine
import Synchronization

extension RegistryService {
    /// How long one read of the change feed may take before it is abandoned as lost: a page is
    /// at most `batch` entries, read in milliseconds from a database that answers.
    static let feedReadDeadline = Duration.seconds(10)
    /// How long loading the whole audience from the tables may take (seconds for ten million
    /// tokens on either store).
    static let audienceLoadDeadline = Duration.seconds(300)

    /// Replaces the audience index with what the tables hold now.
    public func reloadAudience() async throws {
        let feed = feed
        audience.load(try await withDeadline(Self.audienceLoadDeadline, "loading the audience") { try await feed.loadAudience() })
    }

    /// Applies what every process committed since the index's cursor, in the feed's order; reloads
    /// when the index missed changes (it fell behind the feed's retention, or a bulk writer asked).
    /// Each read is abandoned after `feedReadDeadline`, so a database that stops answering makes
    /// this throw rather than wait for ever.
    /// - Returns: the number of changes applied, or `nil` when the index was reloaded.
    @discardableResult
    public func catchUp(batch: Int = 10_000) async throws -> Int? {
        if audience.isStale {
            try await reloadAudience()
            return nil
        }
        let feed = feed
        var applied = 0
        while true {
            let cursor = audience.cursor
            let read = try await withDeadline(Self.feedReadDeadline, "reading the change feed") {
                try await feed.changes(after: cursor, limit: batch)
            }
            audience.apply(read, after: cursor)
            if audience.isStale {
                try await reloadAudience()
                return nil
            }
            applied += read.entries.count
            if read.entries.count < batch { return applied }
        }
    }

    /// What this process's audience index holds (subscriptions, registered tokens, an estimate of
    /// its heap bytes) and the last change-feed entry it applied: what `GET /metrics` shows of it,
    /// without the HTTP side reaching into the index.
    public func audienceSize() -> (subscriptions: Int, registered: Int, bytes: Int, position: Int64) {
        let size = audience.size()
        return (size.subscriptions, size.registered, size.bytes, audience.position)
    }

    /// Committed changes this process's index has not read from the feed yet.
    public func feedLag() async throws -> Int64 {
        let feed = feed
        let cursor = audience.cursor
        return try await withDeadline(Self.feedReadDeadline, "counting the feed's unread entries") {
            try await feed.unread(after: cursor)
        }
    }

    /// What following the feed reports beyond the ordinary.
    public enum FeedEvent: Sendable {
        /// The index missed entries and was loaded again from the tables.
        case reloaded(Duration)
        /// A round failed after rounds that worked: said once, until the feed is read again.
        case failed(any Error)
        /// The feed was read again after failing for this long.
        case recovered(after: Duration, attempts: Int)
        /// The index has not been current for longer than the bound readiness allows.
        case behind(Duration)
    }

    /// Follows the feed until the task is cancelled: catches up whenever the feed rings, and at
    /// least every `interval` (a ring may be missed).
    ///
    /// A round that fails (the database out of reach, a read past its deadline) is reported once;
    /// the next rounds back off from 100 ms to 1 s and resume from the cursor, so the index catches
    /// up within seconds of the database's return. After five failed rounds in a row the index is
    /// loaded again from the tables, in case the cursor itself is what cannot be read. Every round
    /// is bounded in time, so following never stops silently, and cancelling it returns at once.
    /// - Parameter maximumLag: how long the index may go without being current before `.behind`
    ///   is reported (once, until it is current again).
    public func followFeed(
        every interval: Duration, maximumLag: Duration = .seconds(10), report: @Sendable (FeedEvent) -> Void = { _ in }
    ) async {
        let wakeUps = feed.wakeUps()
        await withTaskGroup(of: Void.self) { group in
            let (rings, ring) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
            group.addTask {
                for await _ in wakeUps { ring.yield() }
                ring.finish()
            }
            group.addTask {
                while !Task.isCancelled {
                    try? await Task.sleep(for: interval)
                    ring.yield()
                }
                ring.finish()
            }
            var failing: (since: ContinuousClock.Instant, attempts: Int)?
            var reportedBehind = false
            for await _ in rings {
                guard !Task.isCancelled else { break }
                let started = ContinuousClock.now
                do {
                    if try await catchUp() == nil { report(.reloaded(ContinuousClock.now - started)) }
                    feedHealth.current()
                    if let failing {
                        report(.recovered(after: ContinuousClock.now - failing.since, attempts: failing.attempts))
                    }
                    failing = nil
                    reportedBehind = false
                } catch {
                    // Stopping cancels a read in flight: that is the end of following, not a failure.
                    if Task.isCancelled || error is CancellationError { break }
                    if failing == nil {
                        failing = (started, 0)
                        report(.failed(error))
                    }
                    failing!.attempts += 1
                    // Reads that keep failing, not for want of a connection or of time, from a
                    // database that answers: the cursor itself may be what cannot be read, and the
                    // tables can be. (A slow or absent database is waited out: a reload would cost more.)
                    if failing!.attempts % 5 == 0, !(error is any StoreConnectionFailure), !audience.isStale,
                        await databaseProblem(within: .seconds(2)) == nil
                    {
                        audience.markStale()
                    }
                    let lag = feedHealth.lag()
                    if lag > maximumLag, !reportedBehind {
                        reportedBehind = true
                        report(.behind(lag))
                    }
                    try? await Task.sleep(for: Self.backOff(afterFailures: failing!.attempts))
                }
            }
            group.cancelAll()
        }
    }

    /// 100 ms after the first failed round, doubling to at most a second: a round against a
    /// database out of reach costs one bounded wait for a connection, and the index should be
    /// current within a second or two of the database's return.
    static func backOff(afterFailures count: Int) -> Duration {
        min(.milliseconds(100 << min(max(count - 1, 0), 4)), .seconds(1))
    }

    /// Why the database does not answer a trivial query within `limit`; `nil` when it does.
    func databaseProblem(within limit: Duration) async -> String? {
        let store = store
        do {
            try await withDeadline(limit, "asking the database") { try await store.ping() }
            return nil
        } catch {
            return (error as? any StoreConnectionFailure)?.summary ?? "\(error)"
        }
    }

    /// Whether this server should take requests, for `GET /readyz`: the database answers within
    /// `probeDeadline`, and the audience index has been current within `maximumLag`.
    public func readiness(maximumLag: Duration, probeDeadline: Duration = .seconds(2)) async -> Readiness {
        let problem = await databaseProblem(within: probeDeadline)
        let lag = feedHealth.lag()
        var reasons: [String] = []
        if let problem { reasons.append("the database does not answer: \(problem)") }
        if lag > maximumLag {
            reasons.append("the audience index has not been current for \(Self.seconds(lag)) s (bound \(Self.seconds(maximumLag)) s)")
        }
        return Readiness(
            ready: reasons.isEmpty, database: problem == nil ? "reachable" : "unreachable",
            feedLagSeconds: Self.seconds(lag), reasons: reasons)
    }

    /// A duration in seconds, to the millisecond, for JSON and metrics.
    public static func seconds(_ duration: Duration) -> Double {
        (duration.seconds * 1000).rounded() / 1000
    }
}

/// What `GET /readyz` answers.
public struct Readiness: Sendable, Codable, Equatable {
    public var ready: Bool
    /// `reachable` or `unreachable`.
    public var database: String
    /// Seconds since the audience index was last current with the feed.
    public var feedLagSeconds: Double
    /// Why the server is not ready; empty when it is.
    public var reasons: [String]
}

/// How far this process's audience index is behind the change feed, as the follower last saw it.
public final class FeedHealth: Sendable {
    private let lastCurrent = Mutex(ContinuousClock.now)

    public init() {}

    /// The index has just read everything committed.
    func current() {
        lastCurrent.withLock { $0 = .now }
    }

    /// How long since the index was last current: zero-ish for a follower that keeps up (it reads
    /// every `--feed-interval`), growing while the feed cannot be read.
    public func lag() -> Duration {
        ContinuousClock.now - lastCurrent.withLock { $0 }
    }
}
