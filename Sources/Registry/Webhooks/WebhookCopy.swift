import Foundation

/// A webhook as `fcm-registry copy` moves it from one database to another: what makes it the same
/// hook to the app's receiver (its id, URL, events and secrets, so signatures still verify) and
/// whether it was disabled. Its counters start again at 0, and events still queued stay behind.
///
/// Printed, it never shows its secrets.
public struct WebhookCopy: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    public var publicID: String
    public var url: String
    public var events: Int64
    public var secret: String
    public var previousSecret: String?
    public var previousSecretUntil: Int64?
    public var createdAt: Int64
    public var disabledAt: Int64?
    public var disabledReason: String?

    public init(
        publicID: String, url: String, events: Int64, secret: String, previousSecret: String?,
        previousSecretUntil: Int64?, createdAt: Int64, disabledAt: Int64?, disabledReason: String?
    ) {
        (self.publicID, self.url, self.events, self.secret) = (publicID, url, events, secret)
        (self.previousSecret, self.previousSecretUntil, self.createdAt) = (previousSecret, previousSecretUntil, createdAt)
        (self.disabledAt, self.disabledReason) = (disabledAt, disabledReason)
    }

    public var description: String {
        "\(publicID) \(url) events \(WebhookEventType.types(in: events).map(\.rawValue))"
            + (disabledAt == nil ? "" : ", disabled") + " (secrets not shown)"
    }

    public var debugDescription: String { description }
}

/// What became of a webhook `copy` wrote.
public enum WebhookCopyOutcome: Sendable, Hashable {
    /// Added, or brought up to date (URL, events, secrets, disabled or not) where a copy before
    /// had added it.
    case copied
    /// Not added: the project has `WebhookRules.webhooksPerProject` webhooks already.
    case projectFull
    /// Not written: another project of the target has a webhook with this id.
    case idTakenElsewhere
}

/// The two statements `copy` needs of a store's webhooks, secrets included: nothing else reads
/// a secret but the worker that signs with it.
public protocol WebhookCopyStore: Sendable {
    /// The project's webhooks, oldest first, secrets included.
    func webhookCopies(of project: Int64) async throws -> [WebhookCopy]
    /// In one transaction: updates the project's webhook with the copy's id (counters, queue and
    /// failing clock kept), or else, when `admit` says the project's number of webhooks leaves
    /// room, inserts it.
    /// - Returns: `nil` when another project has a webhook with this id (nothing written), else
    ///   whether it was written.
    func writeWebhookCopy(
        _ webhook: WebhookCopy, into project: Int64, admitting admit: @escaping @Sendable (_ existing: Int) -> Bool
    ) async throws -> Bool?
}

extension WebhookCopyStore {
    /// Writes the copy into `project` within the project's bound of webhooks.
    public func copyWebhook(_ webhook: WebhookCopy, into project: Int64) async throws -> WebhookCopyOutcome {
        let limit = WebhookRules.webhooksPerProject
        switch try await writeWebhookCopy(webhook, into: project, admitting: { $0 < limit }) {
        case nil: return .idTakenElsewhere
        case true?: return .copied
        case false?: return .projectFull
        }
    }
}
