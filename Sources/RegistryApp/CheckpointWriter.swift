import AudienceEngine
import Logging
import Registry
import ServiceLifecycle

/// Saves the audience index every `interval` while it changes, and once more at shutdown, so
/// that the next start loads the checkpoint and replays only the feed after it.
struct CheckpointWriter: Service, CustomStringConvertible {
    let registry: RegistryService
    let interval: Duration
    let logger: Logger

    var description: String { "CheckpointWriter" }

    func run() async throws {
        let saved = await cancelWhenGracefulShutdown { () async -> Int64? in
            var saved: Int64? = nil
            while !Task.isCancelled {
                try? await Task.sleep(for: interval)
                guard !Task.isCancelled, registry.audience.position != saved else { continue }
                saved = await save() ?? saved
            }
            return saved
        }
        if registry.audience.position != saved ?? nil { _ = await save() }
    }

    private func save() async -> Int64? {
        let started = ContinuousClock.now
        do {
            guard let (bytes, position) = try await registry.saveCheckpoint() else { return nil }
            logger.info(
                "audience checkpoint saved",
                metadata: [
                    "bytes": "\(bytes)", "feed.position": "\(position)", "duration": "\(ContinuousClock.now - started)",
                ])
            return position
        } catch {
            logger.error("saving the audience checkpoint failed", metadata: ["error": "\(error)"])
            return nil
        }
    }
}
