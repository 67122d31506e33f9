import Foundation
import Logging
import Metrics
import Registry
import ServiceLifecycle
import Synchronization

/// How webhooks are delivered, as `serve`'s `--webhook-…` options set it (see `docs/webhooks.md`).
public struct WebhookOptions: Sendable, Hashable {
    /// The waits between attempts of one event (Svix's schedule by default: about 27 h in all).
    public var retrySchedule = WebhookRetrySchedule.standard
    /// Whether a webhook may reach loopback, private, link-local or other non-public addresses,
    /// and use `http` (`--webhook-allow-private-networks`).
    public var allowPrivateNetworks = false
    /// One attempt, from resolving the name to the answer's end.
    public var timeout: Duration = .seconds(10)
    /// Bytes of an answer read; the rest is never read.
    public var answerBytes = 1024
    /// Events sent at once by one server: a webhook, or a project, has half of them at most, and
    /// a failing webhook one (`WebhookShares`).
    public var concurrency = 16
    /// How often the queue is looked at when it had nothing due.
    public var pollInterval: Duration = .seconds(1)
    /// How long a claim on an event lasts: a dead server's claims pass to another after it.
    public var lease: Duration = .seconds(60)

    public init() {}

    /// The URL rules these options make.
    public var urlPolicy: WebhookURLPolicy { WebhookURLPolicy(allowPrivateNetworks: allowPrivateNetworks) }
}

/// Sends one event to its webhook, signed, and says what became of it: the second channel of
/// the delivery engine (the first is FCM, `DeliveryChannel`). `HTTPWebhookChannel` (in
/// `Webhooks`) is the one `serve` uses.
public protocol WebhookChannel: Sendable {
    /// One attempt: a POST of the event's payload with the Standard Webhooks headers.
    func send(_ delivery: WebhookDelivery) async -> WebhookAttemptResult
    /// Closes what the channel holds open, once nothing more is sent.
    func shutdown() async
}

/// Drains the webhook queue through a `WebhookChannel`: claims due events with a lease (so that
/// two servers never send one event at once), sends up to `options.concurrency` at a time, each
/// webhook and each project within its share of them (`WebhookShares`: a receiver that never
/// answers holds a few attempts, never all), records each attempt as it ends (delivered, retried
/// on the schedule, given up), and keeps the per-webhook metrics.
///
/// On SIGTERM it claims nothing more, and the attempts in flight end (within the timeout) and are
/// recorded; whatever it still holds is given back. After `kill -9`, its claims pass on when their
/// lease ends, or at once when the server starts again under the same `--server-id`. Each event
/// goes out at least once; a repeat carries the same `webhook-id`.
public final class WebhookWorker: Service, Sendable {
    let registry: RegistryService
    let channel: any WebhookChannel
    let options: WebhookOptions
    let serverID: String
    let keepsItsName: Bool
    let logger: Logger
    private let stopping = Atomic<Bool>(false)
    /// The attempts in flight, by webhook and project.
    private let shares: Mutex<WebhookShares>
    /// An attempt ended since the last claim: a slot, or a webhook's share, may be free again.
    private let ended = Atomic<Bool>(false)

    /// - Parameters:
    ///   - serverID: this server's name in claims (the relay's, `RelayHandoff.serverID`).
    ///   - keepsItsName: whether the name outlives the process (`--server-id`): then claims under
    ///     it at start are this server's from before a crash, taken back at once.
    public init(
        registry: RegistryService, channel: any WebhookChannel, options: WebhookOptions, serverID: String,
        keepsItsName: Bool, logger: Logger
    ) {
        self.registry = registry
        self.channel = channel
        self.options = options
        self.serverID = serverID
        self.keepsItsName = keepsItsName
        self.logger = logger
        self.shares = Mutex(WebhookShares(slots: options.concurrency))
    }

    public func run() async throws {
        let queue = registry.webhooks
        if keepsItsName {
            do {
                try await queue.releaseWebhookEvents(claimedBy: serverID)
            } catch {
                logger.warning(
                    "webhooks: cannot take back this server's earlier claims", metadata: ["error": "\(error)"])
            }
        }
        await withGracefulShutdownHandler {
            await withDiscardingTaskGroup { group in
                var lastEmpty: ContinuousClock.Instant?
                var lastGauges = ContinuousClock.now - .seconds(60)
                while !stopping.load(ordering: .relaxed) && !Task.isCancelled {
                    if ContinuousClock.now - lastGauges >= .seconds(5) {
                        await updateGauges()
                        lastGauges = .now
                    }
                    let now = shares.withLock { $0 }
                    // An attempt that ended may have freed a webhook's share: look again at once.
                    if ended.exchange(false, ordering: .relaxed) { lastEmpty = nil }
                    if now.free > 0, lastEmpty.map({ ContinuousClock.now - $0 >= options.pollInterval }) ?? true {
                        let claimed: [WebhookDelivery]
                        do {
                            claimed = try await queue.claimWebhookEvents(
                                serverID, leaseUntil: Date().addingTimeInterval(options.lease.seconds), now: Date(),
                                shares: now)
                        } catch {
                            logger.warning("webhooks: cannot claim events", metadata: ["error": "\(error)"])
                            claimed = []
                        }
                        lastEmpty = claimed.isEmpty ? .now : nil
                        for delivery in claimed {
                            shares.withLock { $0.started(delivery) }
                            group.addTask { [self] in
                                await attempt(delivery)
                                shares.withLock { $0.ended(delivery) }
                                ended.store(true, ordering: .relaxed)
                            }
                        }
                        if !claimed.isEmpty { continue }
                    }
                    try? await Task.sleep(for: .milliseconds(50))
                }
            }
        } onGracefulShutdown: { [self] in
            stopping.store(true, ordering: .relaxed)
        }
        // Every attempt has ended and been recorded; a claim left (a record that failed) goes back.
        try? await queue.releaseWebhookEvents(claimedBy: serverID)
        await channel.shutdown()
    }

    /// One attempt of one event, recorded.
    func attempt(_ delivery: WebhookDelivery) async {
        let result = await channel.send(delivery)
        let outcome: WebhookAttemptOutcome
        do {
            outcome = try await registry.webhooks.recordWebhookAttempt(
                delivery, result, claimant: serverID, schedule: options.retrySchedule, now: Date())
        } catch {
            // Not recorded: the lease runs out and the event is sent again, with the same id.
            logger.warning(
                "webhooks: cannot record an attempt",
                metadata: ["webhook.id": "\(delivery.webhookID)", "error": "\(error)"])
            return
        }
        let metadata: Logger.Metadata = [
            "webhook.id": "\(delivery.webhookID)", "event.id": "\(delivery.eventID)", "event.type": "\(delivery.type)",
        ]
        switch outcome {
        case .delivered:
            Self.count(delivery, "delivered")
        case .retried(let at):
            Self.count(delivery, "retried")
            if case .failed(let error) = result {
                logger.info(
                    "webhooks: attempt failed, will retry",
                    metadata: metadata.merging(
                        ["error": "\(error)", "retry.at": "\(at)", "attempts": "\(delivery.attempts + 1)"]) { $1 })
            }
        case .gaveUp:
            Self.count(delivery, "failed")
            logger.warning("webhooks: event given up after its last retry", metadata: metadata)
        case .disabled(let reason):
            Self.count(delivery, "retried")
            logger.warning("webhooks: webhook disabled", metadata: metadata.merging(["reason": "\(reason)"]) { $1 })
        case .notHeld:
            break
        }
    }

    // MARK: - Metrics

    private static let counters = Mutex<[String: Counter]>([:])

    /// Attempts by webhook and outcome (`delivered`, `retried`, `failed`), in this process.
    private static func count(_ delivery: WebhookDelivery, _ outcome: String) {
        let key = "\(delivery.webhookID) \(outcome)"
        let counter = counters.withLock { counters in
            if let counter = counters[key] { return counter }
            let counter = Counter(
                label: "fcm_registry_webhook_attempts_total",
                dimensions: [("webhook", delivery.webhookID), ("outcome", outcome)])
            counters[key] = counter
            return counter
        }
        counter.increment()
    }

    /// Each webhook's totals from the database, the same on every server: events sent, failed
    /// for good, and waiting.
    private func updateGauges() async {
        guard let tallies = try? await registry.webhooks.webhookTallies() else { return }
        for tally in tallies {
            let dimensions = [("webhook", tally.id), ("project", tally.projectID)]
            Gauge(label: "fcm_registry_webhook_sent", dimensions: dimensions).record(tally.sent)
            Gauge(label: "fcm_registry_webhook_failed", dimensions: dimensions).record(tally.failed)
            Gauge(label: "fcm_registry_webhook_backlog", dimensions: dimensions).record(tally.backlog)
            Gauge(label: "fcm_registry_webhook_disabled", dimensions: dimensions).record(tally.disabled ? 1 : 0)
        }
    }
}
