import Foundation

/// A project's webhooks, managed with its key: what `/api/webhooks` calls. Each change is audited
/// when it names who made it (`actor`), in its own transaction; its URL without credentials or
/// query, never its secret.
extension RegistryService {
    /// Registers a webhook: the URL is checked (its shape, then every address its name resolves
    /// to) and the events named; the answer holds the only copy of the secret ever shown.
    /// - Parameter events: event type names, at least one, each known.
    /// - Throws: `RegistryError.invalidWebhookURL`, `.invalidWebhookEvents`, `.tooManyWebhooks`.
    public func createWebhook(url: String, events: [String], in project: Project, by actor: AuditActor? = nil)
        async throws -> CreatedWebhook
    {
        let types = try Self.eventTypes(events)
        let target = try webhookPolicy.target(of: url)
        _ = try await webhookPolicy.addresses(of: target)
        let details = ["url": Self.auditedURL(url), "events": types.map(\.rawValue).joined(separator: " ")]
        return try await webhooks.createWebhook(
            project: project.rowID, url: url, events: types, limit: WebhookRules.webhooksPerProject, now: Date()
        ) { id in
            audit(.webhookCreated, target: id, details: details, by: actor, project: project.rowID)
        }
    }

    /// The project's webhooks, oldest first.
    public func webhooks(in project: Project) async throws -> [Webhook] {
        try await webhooks.webhooks(of: project.rowID)
    }

    /// - Throws: `RegistryError.webhookNotFound` (also for another project's webhook).
    public func webhook(_ id: String, in project: Project) async throws -> Webhook {
        guard let webhook = try await webhooks.webhook(id, of: project.rowID) else {
            throw RegistryError.webhookNotFound
        }
        return webhook
    }

    /// Deletes the webhook and every event still waiting for it.
    /// - Throws: `RegistryError.webhookNotFound`.
    public func deleteWebhook(_ id: String, in project: Project, by actor: AuditActor? = nil) async throws {
        let audit = audit(.webhookDeleted, target: id, by: actor, project: project.rowID)
        guard try await webhooks.deleteWebhook(id, of: project.rowID, audit: audit) else {
            throw RegistryError.webhookNotFound
        }
    }

    /// A new secret; the one before signs beside it for `WebhookRules.rotationOverlap`.
    /// - Throws: `RegistryError.webhookNotFound`.
    public func rotateWebhookSecret(_ id: String, in project: Project, by actor: AuditActor? = nil) async throws
        -> CreatedWebhook
    {
        let audit = audit(.webhookSecretRotated, target: id, by: actor, project: project.rowID)
        guard let rotated = try await webhooks.rotateWebhookSecret(id, of: project.rowID, now: Date(), audit: audit)
        else {
            throw RegistryError.webhookNotFound
        }
        return rotated
    }

    /// Turns a webhook the registry disabled back on: same id and secret, its waiting events sent
    /// at once, its 3 days of failures counted afresh. An enabled webhook is left as it is.
    /// - Throws: `RegistryError.webhookNotFound`.
    public func enableWebhook(_ id: String, in project: Project, by actor: AuditActor? = nil) async throws -> Webhook {
        let audit = audit(.webhookEnabled, target: id, by: actor, project: project.rowID)
        guard let enabled = try await webhooks.enableWebhook(id, of: project.rowID, now: Date(), audit: audit) else {
            throw RegistryError.webhookNotFound
        }
        return enabled
    }

    /// "Retry now": every event waiting for the webhook is due at once, rather than at its place in
    /// the retry schedule; its attempts so far, and the schedule after the next failure, stay. A
    /// disabled webhook stays disabled (`enableWebhook` turns it on, and its events due with it).
    /// - Throws: `RegistryError.webhookNotFound`.
    public func retryWebhook(_ id: String, in project: Project, by actor: AuditActor? = nil) async throws -> Webhook {
        let audit = audit(.webhookRetried, target: id, by: actor, project: project.rowID)
        guard let webhook = try await webhooks.retryWebhook(id, of: project.rowID, now: Date(), audit: audit) else {
            throw RegistryError.webhookNotFound
        }
        return webhook
    }

    /// The event types `names` names: at least one, each known, none twice.
    static func eventTypes(_ names: [String]) throws(RegistryError) -> [WebhookEventType] {
        guard !names.isEmpty else {
            throw .invalidWebhookEvents("events must name at least one of \(Self.eventNames)")
        }
        var types: [WebhookEventType] = []
        for name in names {
            guard let type = WebhookEventType(rawValue: name) else {
                throw .invalidWebhookEvents("unknown event type \(name): one of \(Self.eventNames)")
            }
            guard !types.contains(type) else { throw .invalidWebhookEvents("event type \(name) is named twice") }
            types.append(type)
        }
        return types
    }

    private static var eventNames: String {
        WebhookEventType.allCases.map(\.rawValue).joined(separator: ", ")
    }
}
