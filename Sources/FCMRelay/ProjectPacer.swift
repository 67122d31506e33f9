import Synchronization

/// Each project's pace toward FCM: a token bucket under its quota (FCM's own is a bucket of
/// 600,000 a minute, not aligned to minutes), and a pause for the whole project after
/// `QUOTA_EXCEEDED`.
final class ProjectPacer: Sendable {
    private struct Bucket {
        /// When the next send may go, in the bucket's virtual time.
        var nextFree: ContinuousClock.Instant
        var pausedUntil: ContinuousClock.Instant?
    }

    private let interval: Duration
    /// A second's worth of sends may go at once.
    private let burst: Duration = .seconds(1)
    private let buckets = Mutex<[Int64: Bucket]>([:])

    init(ratePerSecond: Int) {
        interval = .nanoseconds(1_000_000_000 / Int64(max(1, ratePerSecond)))
    }

    /// Reserves `count` sends of `project`: how long to wait before the last of them may go
    /// (zero within the burst).
    func reserve(_ project: Int64, count: Int = 1) -> Duration {
        let now = ContinuousClock.now
        return buckets.withLock { buckets in
            var bucket = buckets[project] ?? Bucket(nextFree: now - burst, pausedUntil: nil)
            bucket.nextFree = max(bucket.nextFree, now - burst) + interval * count
            buckets[project] = bucket
            return max(.zero, bucket.nextFree - now)
        }
    }

    func pause(_ project: Int64, for duration: Duration) {
        let until = ContinuousClock.now + duration
        buckets.withLock { buckets in
            var bucket = buckets[project] ?? Bucket(nextFree: .now, pausedUntil: nil)
            bucket.pausedUntil = max(bucket.pausedUntil ?? until, until)
            buckets[project] = bucket
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
}
