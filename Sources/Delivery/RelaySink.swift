import Foundation
import Registry

/// The sink of a server that relays: a relaying project's messages go to the message log and the
/// outbox in one transaction; every other project's to the log alone, as in the emulator.
///
/// A topic or condition send is answered as soon as its job is durable. A direct send's job is
/// claimed by this server and worked at once, and the answer waits for FCM's outcomes, at most
/// `--relay-answer-timeout`.
public struct RelaySink: MessageSink {
    let outbox: any OutboxStore
    let log: StoreMessageLog
    let limits: Limits
    let options: RelayOptions
    let handoff: RelayHandoff
    let settings: RelaySettingsCache
    /// The channels' kinds by name, which make their templates.
    let kinds: [String: any DeliveryChannel.Type]
    /// The server's own channel's kind (the first): it makes the template of a message whose
    /// project names a channel this server does not hold (the worker sends that one nothing).
    let ownKind: any DeliveryChannel.Type

    /// - Parameter channels: the kinds of the channels the worker delivers through, the server's
    ///   own first (as in its `ChannelRegistry`).
    public init(
        store: any RegistryBackend, limits: Limits, options: RelayOptions, handoff: RelayHandoff,
        channels: [any DeliveryChannel.Type]
    ) {
        guard let own = channels.first else { preconditionFailure("a relay without a channel") }
        outbox = store
        log = StoreMessageLog(log: store, limits: limits)
        self.limits = limits
        self.options = options
        self.handoff = handoff
        settings = RelaySettingsCache(outbox: store)
        kinds = Dictionary(channels.map { ($0.name, $0) }, uniquingKeysWith: { first, _ in first })
        ownKind = own
    }

    public var answerWait: Duration { options.answerTimeout }

    public func relays(_ project: Project) async throws -> Bool {
        try await settings.settings()[project.rowID] != nil
    }

    public func accept(_ message: AcceptedMessage) async throws -> DirectOutcomes {
        guard let relay = try await settings.settings()[message.project.rowID] else {
            return try await log.accept(message)
        }
        let template = (kinds[relay.channel] ?? ownKind).template(of: message)
        let direct = message.directTokens
        let claimant = direct != nil && handoff.isAttached ? handoff.serverID : nil
        let deadline = message.receivedAt.addingTimeInterval(Self.retryWindow(message.message, options: options))
        let id: Int64
        do {
            id = try await outbox.enqueue(
                message, body: StoreMessageLog.normalizedJSON(message.message), template: template, deadline: deadline,
                direct: direct, claimant: claimant, leaseUntil: Date().addingTimeInterval(options.lease.seconds),
                bounds: OutboxBounds(
                    outboxMessages: options.outboxMessages, logEntries: limits.messageLogEntries,
                    logBytes: limits.messageLogBytes))
        } catch is OutboxFull {
            throw MessageProblem.outboxFull(retryAfter: 10)
        }
        guard claimant != nil, let direct else {
            handoff.wake()
            return .none
        }
        let job = OutboxJob(
            id: id, messageID: message.id, project: message.project.rowID, template: template, deadline: deadline,
            isDirect: true)
        return await handoff.deliverNow(job, to: direct, timeout: options.answerTimeout)
    }

    /// How long a message is retried: `--relay-deadline`, or its time to live when shorter (but
    /// long enough for a first attempt and a retry: a time to live of 0 means "now or never" to
    /// the device, not to the relay's first try).
    static func retryWindow(_ message: Message, options: RelayOptions) -> TimeInterval {
        let deadline = options.deadline.seconds
        guard let ttl = message.options.timeToLive else { return deadline }
        return min(deadline, max(ttl, 30))
    }
}
