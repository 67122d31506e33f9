import Foundation

/// The webhooks' rules, once, for every store that drives them: a store conforms to
/// `WebhookDriver` (its statements) and gets `WebhookStore` from here.
extension WebhookStore where Self: WebhookDriver {
    public func createWebhook(
        project: Int64, url: String, events: [WebhookEventType], limit: Int, now: Date, audit: WebhookAudit
    ) async throws -> CreatedWebhook {
        let secret = WebhookRules.makeSecret()
        let row = NewWebhookRow(
            publicID: WebhookRules.makeID(prefix: "wh_"), project: project, url: url,
            events: WebhookEventType.mask(events), secret: secret, createdAt: EpochMilliseconds.milliseconds(now))
        let webhook = try await insertWebhook(
            row,
            admitting: { existing in
                guard existing < limit else { throw RegistryError.tooManyWebhooks(limit: limit) }
            }, audit: audit(row.publicID))
        return CreatedWebhook(webhook: webhook, secret: secret)
    }

    public func webhooks(of project: Int64) async throws -> [Webhook] {
        try await webhookRows(of: project, id: nil)
    }

    public func webhook(_ id: String, of project: Int64) async throws -> Webhook? {
        try await webhookRows(of: project, id: id).first
    }

    public func deleteWebhook(_ id: String, of project: Int64, audit: AuditWrite?) async throws -> Bool {
        try await deleteWebhookRow(id, of: project, audit: audit)
    }

    public func rotateWebhookSecret(_ id: String, of project: Int64, now: Date, audit: AuditWrite?) async throws
        -> CreatedWebhook?
    {
        let secret = WebhookRules.makeSecret()
        let until = EpochMilliseconds.milliseconds(now.addingTimeInterval(WebhookRules.rotationOverlap))
        return try await replaceWebhookSecret(id, of: project, with: secret, previousUntil: until, audit: audit).map {
            CreatedWebhook(webhook: $0, secret: secret)
        }
    }

    /// A disabled webhook's failing-for clock starts again from nothing, and what waited for it is
    /// due now: a receiver that is back hears at once, not at each event's place in the schedule.
    public func enableWebhook(_ id: String, of project: Int64, now: Date, audit: AuditWrite?) async throws -> Webhook? {
        try await enableWebhookRow(id, of: project, eventsDueAt: EpochMilliseconds.milliseconds(now), audit: audit)
    }

    public func retryWebhook(_ id: String, of project: Int64, now: Date, audit: AuditWrite?) async throws -> Webhook? {
        try await retryWebhookRows(id, of: project, eventsDueAt: EpochMilliseconds.milliseconds(now), audit: audit)
    }

    /// Which webhooks have events due is one read (an idle queue costs no write); what each may
    /// take of the free slots is `WebhookShares`'s rule; the claim is one transaction.
    public func claimWebhookEvents(_ claimant: String, leaseUntil: Date, now: Date, shares: WebhookShares) async throws
        -> [WebhookDelivery]
    {
        guard shares.free > 0 else { return [] }
        let millis = EpochMilliseconds.milliseconds(now)
        let counts = shares.allot(try await dueWebhookRows(now: millis))
        guard !counts.isEmpty else { return [] }
        return try await claimWebhookRows(
            claimant, leaseUntil: EpochMilliseconds.milliseconds(leaseUntil), now: millis, counts: counts)
    }

    public func recordWebhookAttempt(
        _ delivery: WebhookDelivery, _ result: WebhookAttemptResult, claimant: String, schedule: WebhookRetrySchedule,
        now: Date
    ) async throws -> WebhookAttemptOutcome {
        let millis = EpochMilliseconds.milliseconds(now)
        var write = WebhookAttemptWrite(
            event: delivery.id, webhook: delivery.webhook, claimant: claimant, now: millis, delivered: false,
            nextAttemptAt: nil, error: nil)
        var outcome: WebhookAttemptOutcome
        switch result {
        case .delivered:
            write.delivered = true
            outcome = .delivered
        case .failed(let error):
            write.error = error
            if let wait = schedule.wait(afterAttempts: delivery.attempts + 1) {
                let next = now.addingTimeInterval(wait.seconds)
                write.nextAttemptAt = EpochMilliseconds.milliseconds(next)
                outcome = .retried(at: next)
            } else {
                outcome = .gaveUp
            }
        }
        let limit = EpochMilliseconds.milliseconds(.seconds(WebhookRules.disableAfter))
        let lastError = write.error ?? ""
        let recorded = try await finishWebhookAttempt(write) { failingSince in
            guard millis - failingSince >= limit else { return nil }
            let since = WebhookJSON.timestamp(failingSince)
            return "every attempt failed since \(since) (3 days); last error: \(lastError)"
        }
        guard recorded.held else { return .notHeld }
        if let reason = recorded.disabled { outcome = .disabled(reason: reason) }
        return outcome
    }

    public func releaseWebhookEvents(claimedBy claimant: String) async throws {
        try await releaseWebhookRows(claimedBy: claimant)
    }

    public func webhookTallies() async throws -> [WebhookTally] {
        try await webhookTallyRows()
    }
}

extension WebhookStore {
    /// Up to `limit` due events, round by webhook, with no share bound but `limit`: for tools and tests.
    public func claimWebhookEvents(_ claimant: String, leaseUntil: Date, now: Date, limit: Int) async throws
        -> [WebhookDelivery]
    {
        try await claimWebhookEvents(claimant, leaseUntil: leaseUntil, now: now, shares: .unbounded(limit))
    }
}
