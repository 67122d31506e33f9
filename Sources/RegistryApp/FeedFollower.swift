import Logging
import Registry
import ServiceLifecycle

/// Applies other processes' writes to the audience index as they commit.
struct FeedFollower: Service, CustomStringConvertible {
    let registry: RegistryService
    let interval: Duration
    let logger: Logger

    var description: String { "FeedFollower" }

    func run() async throws {
        let logger = logger
        await cancelWhenGracefulShutdown {
            await registry.followFeed(every: interval) { event in
                switch event {
                case .reloaded(let duration):
                    logger.notice(
                        "audience index reloaded from the tables: this process missed feed entries",
                        metadata: ["duration": "\(duration)"])
                case .failed(let error):
                    logger.error("reading the change feed failed", metadata: ["error": "\(error)"])
                }
            }
        }
    }
}
