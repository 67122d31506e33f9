import Logging
import Registry
import ServiceLifecycle

/// Applies other processes' writes to the audience index as they commit.
struct FeedFollower: Service, CustomStringConvertible {
    let registry: RegistryService
    let interval: Duration
    /// How long the index may go without being current before a warning (and `/readyz` says 503).
    let maximumLag: Duration
    let logger: Logger

    var description: String { "FeedFollower" }

    func run() async throws {
        let logger = logger
        await cancelWhenGracefulShutdown {
            await registry.followFeed(every: interval, maximumLag: maximumLag) { event in
                switch event {
                case .reloaded(let duration):
                    logger.notice(
                        "audience index reloaded from the tables: this process missed feed entries",
                        metadata: ["duration": "\(duration)"])
                case .failed(let error):
                    logger.error(
                        "reading the change feed failed; trying again with back-off",
                        metadata: ["error": "\((error as? any StoreConnectionFailure)?.summary ?? "\(error)")"])
                case .recovered(let after, let attempts):
                    logger.notice(
                        "reading the change feed again; the audience index is current",
                        metadata: ["after": "\(after)", "attempts": "\(attempts)"])
                case .behind(let lag):
                    logger.warning(
                        "the audience index is behind the change feed past --ready-max-lag; /readyz answers 503",
                        metadata: ["lag": "\(lag)"])
                }
            }
        }
    }
}
