import Foundation

/// A server's attempts in flight, by webhook and by project, and the share of its slots each may
/// take: what bounds its claims, so that one receiver that never answers (each attempt lasting
/// the whole timeout) costs only itself, as the relay bounds one project's share of fan-outs.
///
/// A webhook has at most half the slots at once, a project (all its webhooks) at most half, and
/// a failing webhook (its last attempt failed) one: the rest stay free for the others. Claims go
/// round by webhook, earliest due first, one event each per turn.
public struct WebhookShares: Sendable, Hashable {
    /// Attempts at once on this server (`--webhook-concurrency`).
    public var slots: Int
    public var perWebhook: Int
    public var perProject: Int
    /// A webhook whose last attempt failed: one at a time, until an attempt succeeds.
    public var perFailingWebhook: Int
    /// Attempts in flight, by webhook row and by project row.
    public private(set) var byWebhook: [Int64: Int] = [:]
    public private(set) var byProject: [Int64: Int] = [:]
    public private(set) var inFlight = 0

    /// The server's shares: half the slots for a webhook or a project, one for a failing webhook.
    public init(slots: Int) {
        self.init(
            slots: slots, perWebhook: max(1, slots / 2), perProject: max(1, slots / 2), perFailingWebhook: 1)
    }

    public init(slots: Int, perWebhook: Int, perProject: Int, perFailingWebhook: Int) {
        (self.slots, self.perWebhook, self.perProject, self.perFailingWebhook) =
            (slots, perWebhook, perProject, perFailingWebhook)
    }

    /// No bound but `limit` in all: a claim of the queue as it comes, earliest due first.
    public static func unbounded(_ limit: Int) -> WebhookShares {
        WebhookShares(slots: limit, perWebhook: limit, perProject: limit, perFailingWebhook: limit)
    }

    /// Slots free on this server.
    public var free: Int { max(0, slots - inFlight) }

    public mutating func started(_ delivery: WebhookDelivery) {
        byWebhook[delivery.webhook, default: 0] += 1
        byProject[delivery.project, default: 0] += 1
        inFlight += 1
    }

    public mutating func ended(_ delivery: WebhookDelivery) {
        byWebhook[delivery.webhook] = byWebhook[delivery.webhook].flatMap { $0 > 1 ? $0 - 1 : nil }
        byProject[delivery.project] = byProject[delivery.project].flatMap { $0 > 1 ? $0 - 1 : nil }
        inFlight = max(0, inFlight - 1)
    }

    /// How many events to claim of each webhook with some due, `due` earliest due first: one each
    /// per turn, in that order, while the webhook, its project and the server have room.
    /// - Returns: `(webhook row, events)`, in `due`'s order, none with zero.
    public func allot(_ due: [DueWebhook]) -> [(webhook: Int64, count: Int)] {
        var counts = [Int](repeating: 0, count: due.count)
        var projects = byProject
        var room = free
        var progress = true
        while room > 0 && progress {
            progress = false
            for (index, hook) in due.enumerated() where room > 0 {
                let bound = hook.failing ? perFailingWebhook : perWebhook
                guard (byWebhook[hook.webhook] ?? 0) + counts[index] < bound,
                    projects[hook.project, default: 0] < perProject
                else { continue }
                counts[index] += 1
                projects[hook.project, default: 0] += 1
                room -= 1
                progress = true
            }
        }
        return zip(due, counts).compactMap { $1 > 0 ? ($0.webhook, $1) : nil }
    }
}

/// An enabled webhook with events due that nobody holds, as a claim sees it.
public struct DueWebhook: Sendable, Hashable {
    /// The webhook's row and its project's.
    public var webhook: Int64
    public var project: Int64
    /// Its last attempt failed (`failingSince` is set).
    public var failing: Bool

    public init(webhook: Int64, project: Int64, failing: Bool) {
        (self.webhook, self.project, self.failing) = (webhook, project, failing)
    }
}
