import Synchronization

/// Each project's pace toward FCM: a token bucket under its quota (FCM's own is a bucket of
/// 600,000 a minute, not aligned to minutes), a pause for the whole project after
/// `QUOTA_EXCEEDED`, and a slow start after the pause.
///
/// After a pause, the quota may still be closed: rather than a page of requests that would all be
/// refused, one request goes first (the probe); each round answered without a 429 doubles what
/// the next may send, as TCP's slow start does, until a page goes whole again.
final class ProjectPacer: Sendable {
    private struct Bucket {
        /// When the next send may go, in the bucket's virtual time.
        var nextFree: ContinuousClock.Instant
        var pausedUntil: ContinuousClock.Instant?
        /// How many requests the next round may send after a pause; `nil`: as many as it has.
        var allowance: Int?
        /// The pause was extended and nobody has logged and recorded it yet.
        var unreported = false
    }

    private let interval: Duration
    /// A second's worth of sends may go at once.
    private let burst: Duration = .seconds(1)
    /// Past this allowance, the slow start is over.
    private let fullRound: Int
    private let buckets = Mutex<[Int64: Bucket]>([:])

    /// - Parameter fullRound: what a round sends once the slow start has grown to it (a page).
    init(ratePerSecond: Int, fullRound: Int = 500) {
        interval = .nanoseconds(1_000_000_000 / Int64(max(1, ratePerSecond)))
        self.fullRound = max(1, fullRound)
    }

    /// Reserves `count` sends of `project`: how long to wait before the last of them may go
    /// (zero within the burst).
    ///
    /// A direct send (a token, a device group, XMPP: someone waits for its answer) never waits
    /// behind a project's fan-outs: it goes at once and is charged to the bucket, so the fan-outs
    /// after it wait the longer and the project keeps to its rate.
    func reserve(_ project: Int64, count: Int = 1, direct: Bool = false) -> Duration {
        let now = ContinuousClock.now
        return buckets.withLock { buckets in
            var bucket = buckets[project] ?? Bucket(nextFree: now - burst, pausedUntil: nil)
            bucket.nextFree = max(bucket.nextFree, now - burst) + interval * count
            buckets[project] = bucket
            return direct ? .zero : max(.zero, bucket.nextFree - now)
        }
    }

    /// Pauses the project for `duration` (FCM answered 429). The slow start begins when the pause
    /// ends.
    /// - Returns: whether this is news: the project was not already paused as long, so the caller
    ///   logs and records it. Every stream of a page refused at once reports the same pause once.
    @discardableResult
    func pause(_ project: Int64, for duration: Duration) -> Bool {
        let until = ContinuousClock.now + duration
        return buckets.withLock { buckets in
            var bucket = buckets[project] ?? Bucket(nextFree: .now, pausedUntil: nil)
            bucket.allowance = 1
            if let paused = bucket.pausedUntil, paused >= until - .milliseconds(500) {
                buckets[project] = bucket
                return false
            }
            bucket.pausedUntil = until
            bucket.unreported = true
            buckets[project] = bucket
            return true
        }
    }

    /// The pause still to be logged and recorded, once: `nil` when it has been (or there is none).
    func takePauseReport(_ project: Int64) -> Duration? {
        let now = ContinuousClock.now
        return buckets.withLock { buckets in
            guard var bucket = buckets[project], bucket.unreported, let until = bucket.pausedUntil, until > now
            else { return nil }
            bucket.unreported = false
            buckets[project] = bucket
            return until - now
        }
    }

    /// How long the project is still paused; `nil` when it is not.
    func pause(of project: Int64) -> Duration? {
        let now = ContinuousClock.now
        return buckets.withLock { buckets in
            guard let until = buckets[project]?.pausedUntil, until > now else { return nil }
            return until - now
        }
    }

    /// Whether no new request of the project may start now.
    func isPaused(_ project: Int64) -> Bool {
        pause(of: project) != nil
    }

    /// How many of `wanted` requests the project's next round may send: all of them, unless a
    /// slow start after a pause holds it to fewer.
    func admit(_ project: Int64, wanting wanted: Int) -> Int {
        buckets.withLock { buckets in min(wanted, buckets[project]?.allowance ?? wanted) }
    }

    /// A round of `sent` requests was answered without a 429: the next may send twice as many.
    func grow(_ project: Int64, after sent: Int) {
        guard sent > 0 else { return }
        buckets.withLock { buckets in
            guard var bucket = buckets[project], let allowance = bucket.allowance, sent >= allowance else { return }
            bucket.allowance = allowance * 2 >= fullRound ? nil : allowance * 2
            buckets[project] = bucket
        }
    }
}
