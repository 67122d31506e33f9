import Foundation
import Logging
import Registry
import ServiceLifecycle

/// Runs the expiry sweep (`TokenExpirySweep`): a look every `tick` (30 s) for projects whose round
/// is due, so that a round runs within a minute of the server starting or of a policy being set
/// (which clears the project's claim), then hourly; the claim on the project's row keeps every
/// other server on the database from sweeping the same hour. In its first minute it also runs a
/// round a crash or a stop cut short (`TokenExpirySweep.startUpWindow`). One log line per round
/// that ran.
struct TokenExpiryWorker: Service, CustomStringConvertible {
    let sweep: TokenExpirySweep
    let tick: Duration
    let logger: Logger

    init(registry: RegistryService, tick: Duration = .seconds(30), logger: Logger) {
        sweep = TokenExpirySweep(registry: registry)
        self.tick = tick
        self.logger = logger
    }

    var description: String { "TokenExpiryWorker" }

    func run() async throws {
        await cancelWhenGracefulShutdown {
            let started = ContinuousClock.now
            while !Task.isCancelled {
                do {
                    // In its first minute the server also finishes a round a crash or a stop cut short.
                    let window = ContinuousClock.now - started < .seconds(60) ? TokenExpirySweep.startUpWindow : nil
                    for round in try await sweep.runDueRounds(claimedWithin: window) {
                        logger.info(
                            "expired tokens swept",
                            metadata: ["project": "\(round.project)", "expired": "\(round.expired)"])
                    }
                } catch {
                    logger.warning("the token expiry sweep failed; it tries again", metadata: ["error": "\(error)"])
                }
                try? await Task.sleep(for: tick)
            }
        }
    }
}
