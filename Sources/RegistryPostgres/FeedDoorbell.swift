import Logging
import PostgresNIO

/// Rings the other servers' followers after this server's commits: one `NOTIFY` at a time, in a
/// transaction of its own, for however many commits came since the last.
///
/// A NOTIFY inside a write would take PostgreSQL's one notification lock at commit and hold it
/// through the commit's WAL flush, so every server's writes would commit one at a time. Rung
/// after the commit, a NOTIFY writes no WAL and holds the lock for a moment; commits that land
/// while one is being sent share the next. A ring that fails is logged: the followers' poll
/// (`--feed-interval`) reads the feed anyway.
final class FeedDoorbell: Sendable {
    private let continuation: AsyncStream<Void>.Continuation
    private let ringer: Task<Void, Never>

    init(client: PostgresClient, logger: Logger) {
        let (rings, continuation) = AsyncStream<Void>.makeStream(bufferingPolicy: .bufferingNewest(1))
        self.continuation = continuation
        ringer = Task {
            for await _ in rings {
                do {
                    _ = try await client.query("SELECT pg_notify(\(PostgresFeed.channel), '')", logger: logger).collect()
                } catch {
                    logger.notice("ringing the feed's doorbell failed; the other servers' poll reads the feed")
                }
            }
        }
    }

    /// Asks for a ring; returns at once.
    func ring() {
        continuation.yield()
    }

    /// Stops ringing, once what was asked for is sent.
    func stop() async {
        continuation.finish()
        await ringer.value
    }
}
