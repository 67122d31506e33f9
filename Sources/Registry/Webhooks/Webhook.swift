import Foundation

/// What a webhook can be told, in the Standard Webhooks' dotted form.
public enum WebhookEventType: String, Sendable, Hashable, Codable, CaseIterable {
    /// A token the relay unregistered because the channel said it is gone; the event's reason is
    /// the channel's own word for it.
    case tokenUnregistered = "token.unregistered"
    /// A recipient that failed for good: a permanent error, or its retries spent.
    case deliveryFailed = "delivery.failed"
    /// A message with nothing pending any more.
    case messageCompleted = "message.completed"

    /// The type's bit in a webhook's `events` column: a row is matched with one `&`.
    public var bit: Int64 {
        switch self {
        case .tokenUnregistered: 1
        case .deliveryFailed: 2
        case .messageCompleted: 4
        }
    }

    /// The bits of `types`.
    public static func mask(_ types: some Sequence<WebhookEventType>) -> Int64 {
        types.reduce(0) { $0 | $1.bit }
    }

    /// The types whose bits `mask` holds, in declaration order.
    public static func types(in mask: Int64) -> [WebhookEventType] {
        allCases.filter { mask & $0.bit != 0 }
    }
}

/// A project's webhook, as `GET /api/webhooks/{id}` shows it: never its secret.
public struct Webhook: Sendable, Hashable {
    /// The public id, `wh_…`.
    public var id: String
    public var project: Int64
    public var url: String
    public var events: [WebhookEventType]
    public var createdAt: Date
    /// Events waiting for it, retries included.
    public var backlog: Int
    /// Events it acknowledged with a 2xx, and events that failed for good (retries spent).
    public var sent: Int
    public var failed: Int
    /// Events not queued because its backlog was full.
    public var dropped: Int
    public var lastAttemptAt: Date?
    public var lastError: String?
    /// When `lastError` was met: the last failed attempt.
    public var lastErrorAt: Date?
    /// When the next attempt of its queue is due: its earliest event's (`nil` when nothing waits).
    /// A claimed event counts with the time it was due, so a time past means "under way".
    public var nextAttemptAt: Date?
    /// Since when every attempt failed; `nil` after a success.
    public var failingSince: Date?
    public var disabledAt: Date?
    public var disabledReason: String?
    /// Until when the secret before the last rotation still signs beside the new one.
    public var previousSecretUntil: Date?

    public init(
        id: String, project: Int64, url: String, events: [WebhookEventType], createdAt: Date, backlog: Int = 0,
        sent: Int = 0, failed: Int = 0, dropped: Int = 0, lastAttemptAt: Date? = nil, lastError: String? = nil,
        failingSince: Date? = nil, disabledAt: Date? = nil, disabledReason: String? = nil,
        previousSecretUntil: Date? = nil, lastErrorAt: Date? = nil, nextAttemptAt: Date? = nil
    ) {
        (self.id, self.project, self.url, self.events, self.createdAt) = (id, project, url, events, createdAt)
        (self.backlog, self.sent, self.failed, self.dropped) = (backlog, sent, failed, dropped)
        (self.lastAttemptAt, self.lastError, self.failingSince) = (lastAttemptAt, lastError, failingSince)
        (self.disabledAt, self.disabledReason, self.previousSecretUntil) = (
            disabledAt, disabledReason, previousSecretUntil
        )
        (self.lastErrorAt, self.nextAttemptAt) = (lastErrorAt, nextAttemptAt)
    }
}

/// A webhook just created: the only time its secret is shown.
public struct CreatedWebhook: Sendable, Hashable {
    public var webhook: Webhook
    /// `whsec_` and the base64 of the key's bytes.
    public var secret: String
}

/// One event on its way to one webhook, as the worker sends it: the event, and what signs it.
public struct WebhookDelivery: Sendable, Hashable {
    /// The queue row's id.
    public var id: Int64
    public var webhook: Int64
    /// The webhook's public id (`wh_…`), for logs and metrics.
    public var webhookID: String
    public var project: Int64
    /// `webhook-id`: the event's id, the same on every attempt (and for every webhook of the event).
    public var eventID: String
    public var type: String
    /// The JSON body, as queued: every attempt sends these bytes.
    public var payload: String
    /// Attempts made before this one.
    public var attempts: Int
    public var url: String
    public var secret: String
    /// The secret before the last rotation, while it still signs.
    public var previousSecret: String?

    public init(
        id: Int64, webhook: Int64, webhookID: String, project: Int64, eventID: String, type: String, payload: String,
        attempts: Int, url: String, secret: String, previousSecret: String?
    ) {
        (self.id, self.webhook, self.webhookID, self.project) = (id, webhook, webhookID, project)
        (self.eventID, self.type) = (eventID, type)
        (self.payload, self.attempts, self.url, self.secret, self.previousSecret) =
            (payload, attempts, url, secret, previousSecret)
    }
}

/// What became of one attempt to deliver an event.
public enum WebhookAttemptResult: Sendable, Hashable {
    /// A 2xx answer.
    case delivered
    /// No 2xx: an error status, a timeout, a refused connection or address. The words are what
    /// `GET /api/webhooks/{id}` shows as `lastError`.
    case failed(String)
}

/// What the worker learns from recording an attempt.
public enum WebhookAttemptOutcome: Sendable, Hashable {
    case delivered
    /// Tried again at that time.
    case retried(at: Date)
    /// Its retries are spent: counted as failed, dropped from the queue.
    case gaveUp
    /// The webhook has failed for `WebhookRules.disableAfter` and is disabled now.
    case disabled(reason: String)
    /// Another server holds the event now; nothing was written.
    case notHeld
}

/// A webhook's counters, for the per-hook metrics.
public struct WebhookTally: Sendable, Hashable {
    public var id: String
    public var projectID: String
    public var backlog: Int
    public var sent: Int
    public var failed: Int
    public var disabled: Bool

    public init(id: String, projectID: String, backlog: Int, sent: Int, failed: Int, disabled: Bool) {
        (self.id, self.projectID, self.backlog, self.sent, self.failed, self.disabled) =
            (id, projectID, backlog, sent, failed, disabled)
    }
}

/// The webhooks of each project and their queue of events: what `RegistryService+Webhooks` and
/// the webhook worker call. Its rules are written once, in `WebhookEngine.swift`, for any store
/// that is a `WebhookDriver`. Events go into the queue inside the outbox's own transactions
/// (`OutboxDriver.recordPage`), never through this protocol.
public protocol WebhookStore: Sendable {
    /// Adds a webhook, unless the project has `limit` already. Each change here writes the audit
    /// entry `audit` makes from the webhook's id in its transaction, and none when it changes nothing.
    /// - Throws: `RegistryError.tooManyWebhooks`.
    func createWebhook(
        project: Int64, url: String, events: [WebhookEventType], limit: Int, now: Date, audit: WebhookAudit
    ) async throws -> CreatedWebhook
    func webhooks(of project: Int64) async throws -> [Webhook]
    func webhook(_ id: String, of project: Int64) async throws -> Webhook?
    /// Deletes it and its queued events; `false` when the project has no such webhook.
    func deleteWebhook(_ id: String, of project: Int64, audit: AuditWrite?) async throws -> Bool
    /// A new secret; the one before keeps signing beside it for `WebhookRules.rotationOverlap`.
    /// `nil` when the project has no such webhook.
    func rotateWebhookSecret(_ id: String, of project: Int64, now: Date, audit: AuditWrite?) async throws
        -> CreatedWebhook?
    /// Turns a disabled webhook back on, keeping its id, secrets, counters and queued events, which
    /// are due at `now`; its failures are counted from nothing again. An enabled one is left as it
    /// is. `nil` when the project has no such webhook.
    func enableWebhook(_ id: String, of project: Int64, now: Date, audit: AuditWrite?) async throws -> Webhook?

    /// Makes every event waiting for the webhook due at `now` ("retry now"); its claims, attempts
    /// and counters stay. `nil` when the project has no such webhook.
    func retryWebhook(_ id: String, of project: Int64, now: Date, audit: AuditWrite?) async throws -> Webhook?
    /// Claims due events of enabled webhooks that nobody holds (or whose lease ran out), within
    /// `shares`: round by webhook, each webhook and project within its share of the free slots.
    func claimWebhookEvents(_ claimant: String, leaseUntil: Date, now: Date, shares: WebhookShares) async throws
        -> [WebhookDelivery]
    /// Records an attempt, only while `claimant` holds the event: delivered events leave the
    /// queue; a failed one waits for its next try, or leaves it once `schedule` is spent; a webhook
    /// failing for `WebhookRules.disableAfter` is disabled.
    func recordWebhookAttempt(
        _ delivery: WebhookDelivery, _ result: WebhookAttemptResult, claimant: String, schedule: WebhookRetrySchedule,
        now: Date
    ) async throws -> WebhookAttemptOutcome
    /// Gives back every event `claimant` holds, to be claimed at once.
    func releaseWebhookEvents(claimedBy claimant: String) async throws
    /// Every webhook's counters, for the metrics.
    func webhookTallies() async throws -> [WebhookTally]
}

/// The audit entry of a webhook's creation, from the id it is given.
public typealias WebhookAudit = @Sendable (_ id: String) -> AuditWrite?

/// The changes without an audit entry: what the registry does itself, and the stores' tests.
extension WebhookStore {
    public func createWebhook(
        project: Int64, url: String, events: [WebhookEventType], limit: Int, now: Date
    ) async throws -> CreatedWebhook {
        try await createWebhook(project: project, url: url, events: events, limit: limit, now: now) { _ in nil }
    }

    public func deleteWebhook(_ id: String, of project: Int64) async throws -> Bool {
        try await deleteWebhook(id, of: project, audit: nil)
    }

    public func rotateWebhookSecret(_ id: String, of project: Int64, now: Date) async throws -> CreatedWebhook? {
        try await rotateWebhookSecret(id, of: project, now: now, audit: nil)
    }

    public func enableWebhook(_ id: String, of project: Int64, now: Date) async throws -> Webhook? {
        try await enableWebhook(id, of: project, now: now, audit: nil)
    }

    public func retryWebhook(_ id: String, of project: Int64, now: Date) async throws -> Webhook? {
        try await retryWebhook(id, of: project, now: now, audit: nil)
    }
}
