import FCMWire
import Foundation
import Hummingbird
import Registry

/// `/api/webhooks`: the project's webhooks, in the Standard Webhooks format (`docs/webhooks.md`).
/// Managed with the project's key; another project's webhook is not found.
struct WebhookController {
    let registry: RegistryService

    func addRoutes(to routes: RouteRecorder) {
        routes.on("/api/webhooks", .post, use: create)
        routes.on("/api/webhooks", .get, use: list)
        routes.on("/api/webhooks/:id", .get, use: show)
        routes.on("/api/webhooks/:id", .delete, use: delete)
        routes.on("/api/webhooks/{id}:rotateSecret", .post, use: rotateSecret)
        routes.on("/api/webhooks/{id}:enable", .post, use: enable)
        routes.on("/api/webhooks/{id}:retry", .post, use: retry)
    }

    /// `{"url": "https://…", "events": ["token.unregistered", …]}`.
    struct CreateRequest: Decodable {
        var url: String?
        var events: [String]?
    }

    /// A webhook as every route but the creating one shows it: never its secret.
    struct Shown: Encodable {
        var id: String
        var url: String
        var events: [String]
        var createdAt: Date
        /// Events waiting for it, retries included.
        var backlog: Int
        var sent: Int
        var failed: Int
        var dropped: Int
        var lastAttemptAt: Date?
        var lastError: String?
        /// When `lastError` was met.
        var lastErrorAt: Date?
        /// When the queue's next attempt is due (its earliest event); absent when nothing waits.
        var nextAttemptAt: Date?
        var failingSince: Date?
        var disabled: Bool
        var disabledAt: Date?
        var disabledReason: String?
        /// Until when the secret before the last rotation signs beside the current one.
        var previousSecretExpiresAt: Date?

        init(_ webhook: Webhook) {
            (id, url, events, createdAt) = (webhook.id, webhook.url, webhook.events.map(\.rawValue), webhook.createdAt)
            (backlog, sent, failed, dropped) = (webhook.backlog, webhook.sent, webhook.failed, webhook.dropped)
            (lastAttemptAt, lastError, failingSince) = (webhook.lastAttemptAt, webhook.lastError, webhook.failingSince)
            (lastErrorAt, nextAttemptAt) = (webhook.lastErrorAt, webhook.nextAttemptAt)
            (disabled, disabledAt, disabledReason) = (
                webhook.disabledAt != nil, webhook.disabledAt, webhook.disabledReason
            )
            previousSecretExpiresAt = webhook.previousSecretUntil.flatMap { $0 > Date() ? $0 : nil }
        }
    }

    /// The creating answer, and the rotating one: the webhook and its new secret, shown only here.
    struct WithSecret: Encodable {
        var id: String
        var url: String
        var events: [String]
        var createdAt: Date
        var secret: String

        init(_ created: CreatedWebhook) {
            (id, url, events) = (created.webhook.id, created.webhook.url, created.webhook.events.map(\.rawValue))
            (createdAt, secret) = (created.webhook.createdAt, created.secret)
        }
    }

    struct ShownOne: ResponseEncodable {
        var webhook: Shown

        func encode(to encoder: any Encoder) throws { try webhook.encode(to: encoder) }
    }

    struct List: ResponseEncodable {
        var webhooks: [Shown]
    }

    /// `POST /api/webhooks` → 201 with the secret.
    @Sendable func create(_ request: Request, context: RegistryRequestContext) async throws -> Response {
        let project = try context.requireProject()
        let body = try await JSONBody.decode(CreateRequest.self, from: request, limit: registry.limits.requestBodyBytes)
        guard let url = body.url else { throw BadRequest.webhookURLRequired }
        guard let events = body.events else { throw BadRequest.webhookEventsRequired }
        let created = try await registry.createWebhook(
            url: url, events: events, in: project, by: context.actor(request))
        return try JSONResponse.make(WithSecret(created), status: .created)
    }

    /// `GET /api/webhooks`.
    @Sendable func list(_ request: Request, context: RegistryRequestContext) async throws -> List {
        List(webhooks: try await registry.webhooks(in: try context.requireProject()).map(Shown.init))
    }

    /// `GET /api/webhooks/{id}`.
    @Sendable func show(_ request: Request, context: RegistryRequestContext) async throws -> ShownOne {
        let project = try context.requireProject()
        return ShownOne(
            webhook: Shown(try await registry.webhook(try request.pathValue("id", context: context), in: project)))
    }

    /// `DELETE /api/webhooks/{id}` → 204.
    @Sendable func delete(_ request: Request, context: RegistryRequestContext) async throws -> Response {
        let project = try context.requireProject()
        try await registry.deleteWebhook(
            try request.pathValue("id", context: context), in: project, by: context.actor(request))
        return Response(status: .noContent)
    }

    /// `POST /api/webhooks/{id}:rotateSecret`: a new secret; the previous one signs beside it for 24 h.
    @Sendable func rotateSecret(_ request: Request, context: RegistryRequestContext) async throws -> Response {
        let project = try context.requireProject()
        let rotated = try await registry.rotateWebhookSecret(
            try request.pathValue("id", context: context), in: project, by: context.actor(request))
        return try JSONResponse.make(WithSecret(rotated), status: .ok)
    }

    /// `POST /api/webhooks/{id}:enable`: a disabled webhook on again, with its id, secret and waiting
    /// events; shown as `GET /api/webhooks/{id}` shows it. An enabled one is left as it is.
    @Sendable func enable(_ request: Request, context: RegistryRequestContext) async throws -> ShownOne {
        let project = try context.requireProject()
        return ShownOne(
            webhook: Shown(
                try await registry.enableWebhook(
                    try request.pathValue("id", context: context), in: project, by: context.actor(request))))
    }

    /// `POST /api/webhooks/{id}:retry`: "retry now", every waiting event due at once; the webhook as
    /// `GET /api/webhooks/{id}` shows it.
    @Sendable func retry(_ request: Request, context: RegistryRequestContext) async throws -> ShownOne {
        let project = try context.requireProject()
        return ShownOne(
            webhook: Shown(
                try await registry.retryWebhook(
                    try request.pathValue("id", context: context), in: project, by: context.actor(request))))
    }
}
