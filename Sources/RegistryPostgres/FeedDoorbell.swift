import Logging
import PostgresNIO

/// Rings the other servers' followers after this server's commits: one `NOTIFY` at a time, in a
/// transaction of its own, for however many commits came since the last.
///
/// PostgreSQL takes its one notification lock when a transaction that notified commits, and holds
/// it through that commit's flush. A NOTIFY inside every write made all servers' writes commit one
/// at a time; rung from here, at most one transaction per server holds the lock at a time, and
/// commits that land while a ring is being sent share the next. A ring that fails, or is still
/// queued when a command exits, is made up for by the followers' poll (`--feed-interval`).
final class FeedDoorbell: Sendable {
    private let continuation: AsyncStream<Void>.Continuation
    private let ringer: Task<Void, Never>

    init(database: DatabasePool, logger: Logger) {
        let (rings, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        self.continuation = continuation
        ringer = Task {
            let failing = FailureFlag()
            for await _ in rings {
                do {
                    _ = try await database.query("SELECT pg_notify(\(PostgresFeed.channel), '')")
                    if failing.clear() { logger.notice("ringing the feed's doorbell again") }
                } catch {
                    // Once until a ring goes out again: an outage fails every ring.
                    if failing.set() {
                        logger.notice("ringing the feed's doorbell failed; the other servers' poll reads the feed")
                    }
                }
            }
        }
    }

    /// Asks for a ring; returns at once.
    func ring() {
        continuation.yield()
    }

    /// Stops ringing: what was asked for gets two seconds to go out, so that a database out of
    /// reach does not hold up shutdown.
    func stop() async {
        continuation.finish()
        let ringer = self.ringer
        let deadline = Task {
            try? await Task.sleep(for: .seconds(2))
            ringer.cancel()
        }
        await ringer.value
        deadline.cancel()
    }
}
