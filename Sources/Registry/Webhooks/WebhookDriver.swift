import Foundation

/// The statements a store runs for webhooks and their queue, and nothing of the rules: those live
/// once, in `WebhookStore`'s implementation for every driver (`WebhookEngine.swift`), as the
/// outbox's do above `OutboxDriver`. Each requirement is one transaction or one read; a decision
/// that depends on what the transaction reads comes in as a synchronous closure.
///
/// Events enter the queue inside `OutboxDriver.recordPage`'s transaction (each store's
/// `appendWebhookEvents`, which asks `WebhookEventBatch.rows` what to insert). Times are epoch
/// milliseconds.
public protocol WebhookDriver: Sendable {
    /// In one transaction: calls `admit` with the project's number of webhooks (it throws to
    /// refuse), then inserts the webhook and `audit`'s entry.
    func insertWebhook(
        _ row: NewWebhookRow, admitting admit: @escaping @Sendable (_ existing: Int) throws -> Void,
        audit: AuditWrite?
    ) async throws -> Webhook
    /// The project's webhooks (only `id`'s, when given), oldest first.
    func webhookRows(of project: Int64, id: String?) async throws -> [Webhook]
    /// Deletes the webhook and its queue, and inserts `audit`'s entry; `false` when the project has
    /// no such webhook (nothing written). The same `audit` in each write below.
    func deleteWebhookRow(_ id: String, of project: Int64, audit: AuditWrite?) async throws -> Bool
    /// The secret becomes the previous one, signing until `previousUntil`; `secret` the current.
    func replaceWebhookSecret(
        _ id: String, of project: Int64, with secret: String, previousUntil: Int64, audit: AuditWrite?
    ) async throws -> Webhook?
    /// In one transaction, only while the webhook is disabled (else nothing is written): clears
    /// `disabledAt`, `disabledReason` and `failingSince`, and brings the next attempt of each of its
    /// queued events due later than `eventsDueAt` forward to it; claims, attempts and counters stay.
    /// - Returns: the webhook as it is after; `nil` when the project has no such webhook.
    func enableWebhookRow(_ id: String, of project: Int64, eventsDueAt: Int64, audit: AuditWrite?) async throws
        -> Webhook?
    /// In one transaction, while the project has such a webhook: brings the next attempt of each of
    /// its queued events due later than `eventsDueAt` forward to it (claims stay).
    /// - Returns: the webhook as it is after; `nil` when the project has no such webhook.
    func retryWebhookRows(_ id: String, of project: Int64, eventsDueAt: Int64, audit: AuditWrite?) async throws
        -> Webhook?
    /// The enabled webhooks with a queue row due at `now`, unclaimed or with an expired lease, the
    /// one due earliest first: one indexed look per webhook, whatever its queue's length.
    func dueWebhookRows(now: Int64) async throws -> [DueWebhook]
    /// In one transaction: for each `(webhook, count)`, up to `count` of the webhook's queue rows
    /// due at `now`, unclaimed or with an expired lease, earliest due first, while it is enabled,
    /// claimed for `claimant`; each with its webhook's URL and secrets (the previous one only while
    /// it still signs at `now`).
    func claimWebhookRows(_ claimant: String, leaseUntil: Int64, now: Int64, counts: [(webhook: Int64, count: Int)])
        async throws -> [WebhookDelivery]
    /// In one transaction, only while `write.claimant` holds the row (else `nil`, nothing
    /// written): deletes the row (delivered, or given up) or sets its next attempt, updates the
    /// webhook's counters, last attempt, last error and `failingSince`; after a failure, calls
    /// `disable` with `failingSince` and disables the webhook with the reason it gives.
    /// - Returns: the reason the webhook was disabled, if it was now.
    func finishWebhookAttempt(
        _ write: WebhookAttemptWrite, disable: @escaping @Sendable (_ failingSince: Int64) -> String?
    ) async throws -> (held: Bool, disabled: String?)
    /// Every row `claimant` holds, unclaimed.
    func releaseWebhookRows(claimedBy claimant: String) async throws
    /// Every webhook's counters, with its project's name.
    func webhookTallyRows() async throws -> [WebhookTally]
}

/// A webhook to insert.
public struct NewWebhookRow: Sendable {
    public var publicID: String
    public var project: Int64
    public var url: String
    public var events: Int64
    public var secret: String
    public var createdAt: Int64
}

/// What recording one attempt writes, computed before its transaction.
public struct WebhookAttemptWrite: Sendable {
    public var event: Int64
    public var webhook: Int64
    public var claimant: String
    public var now: Int64
    public var delivered: Bool
    /// For a failure: when to try again; `nil` gives the event up (counted as failed).
    public var nextAttemptAt: Int64?
    public var error: String?
}
