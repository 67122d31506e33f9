import Foundation

/// A webhook as `fcm-registry copy` moves it from one database to another: what makes it the same
/// hook to the app's receiver (its id, URL, events and secrets, so signatures still verify) and
/// whether it was disabled. Its counters start again at 0, and events still queued stay behind.
public struct WebhookCopy: Sendable, Hashable {
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
}

/// The two statements `copy` needs of a store's webhooks, secrets included: nothing else reads
/// a secret but the worker that signs with it.
public protocol WebhookCopyStore: Sendable {
    /// The project's webhooks, oldest first, secrets included.
    func webhookCopies(of project: Int64) async throws -> [WebhookCopy]
    /// Inserts the webhook into `project` unless a webhook with its id is there already (a copy
    /// run again changes nothing); `false` when it was.
    func insertWebhookCopy(_ webhook: WebhookCopy, into project: Int64) async throws -> Bool
}
