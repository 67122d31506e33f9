import Foundation

/// The events a recorded page of the outbox causes, kept as bare facts until the page's
/// transaction finds that the project has webhooks: a project without any pays for one indexed
/// read when a page has a failure or finishes its message, and never for a payload.
///
/// The store calls `rows(for:projectID:finished:counts:)` inside the page's transaction, with the project's
/// enabled webhooks; the events go into the queue in that transaction, so none is written for an
/// outcome that was not, and none is lost once it was.
public struct WebhookEventBatch: Sendable {
    /// A recipient's outcome that is an event.
    public struct Fact: Sendable, Hashable {
        public var type: WebhookEventType
        public var token: String
        public var error: String
    }

    public var messageID: String = ""
    public var facts: [Fact] = []
    public var now: Int64 = 0

    public init() {}

    /// A message finished without its page: the relay turned off under it (`RELAY_OFF`), or it was
    /// cancelled. Only its completion is told; its recipients failed by the switch, or cancelled,
    /// are in the completion's counts.
    public init(finishing messageID: String, now: Int64) {
        (self.messageID, self.now) = (messageID, now)
    }

    /// The events of a page's outcomes: each failed recipient's; the message's completion is
    /// added in the transaction, when it finds that the page finished the job.
    public init(_ outcomes: [DeliveryOutcome], of job: OutboxJob, page: AttemptPage, now: Int64) {
        (messageID, self.now) = (job.messageID, now)
        let walkedGone = page.alreadyGone.isEmpty ? [] : Set(page.alreadyGone.map(\.token))
        for outcome in outcomes where outcome.state == .failed {
            let gone = outcome.gone && !walkedGone.contains(outcome.attempt.token)
            failed(outcome.attempt.token, error: outcome.error ?? "UNKNOWN", gone: gone)
        }
    }

    /// A finished message's recipients by outcome, as its completion event tells them.
    public struct Counts: Sendable, Hashable {
        public var delivered: Int
        public var failed: Int
        /// Never sent: the message was cancelled first. Told only when it was.
        public var cancelled: Int

        public init(delivered: Int, failed: Int, cancelled: Int = 0) {
            (self.delivered, self.failed, self.cancelled) = (delivered, failed, cancelled)
        }
    }

    /// The expiry sweep's tokens (`TokenExpirySweep`): each one's `token.unregistered`, with
    /// reason `EXPIRED` and no message.
    public init(expired tokens: [String], now: Int64) {
        self.now = now
        facts = tokens.map { Fact(type: .tokenUnregistered, token: $0, error: "EXPIRED") }
    }

    /// Whether the page's transaction need look for webhooks at all.
    public func isEmpty(finished: Bool) -> Bool { facts.isEmpty && !finished }

    /// A failed recipient: `delivery.failed`, and `token.unregistered` when the channel said the
    /// token is gone (not when the walk found it unregistered already: that was told before).
    mutating func failed(_ token: String, error: String, gone: Bool) {
        facts.append(Fact(type: .deliveryFailed, token: token, error: error))
        if gone { facts.append(Fact(type: .tokenUnregistered, token: token, error: error)) }
    }

    /// A webhook as the page's transaction reads it.
    public struct Target: Sendable, Hashable {
        public var rowID: Int64
        public var events: Int64
        public var backlog: Int

        public init(rowID: Int64, events: Int64, backlog: Int) {
            (self.rowID, self.events, self.backlog) = (rowID, events, backlog)
        }
    }

    /// One queue row to insert.
    public struct Row: Sendable, Hashable {
        public var webhook: Int64
        public var eventID: String
        public var type: String
        public var payload: String
    }

    /// The queue rows for `targets`: each event once per webhook subscribed to its type, one id
    /// per event shared by its webhooks, within each webhook's backlog bound.
    /// - Parameters:
    ///   - projectID: the project's name, as the events say it.
    ///   - finished: whether the page finished its message.
    ///   - counts: the message's recipients by outcome once the page is recorded.
    /// - Returns: the rows, and per webhook how many events its full backlog dropped.
    public func rows(
        for targets: [Target], projectID: String, finished: Bool, counts: Counts?
    ) -> (rows: [Row], dropped: [Int64: Int]) {
        var events: [(type: WebhookEventType, data: [String: WebhookJSON])] = facts.map { fact in
            var data: [String: WebhookJSON] = ["projectId": .string(projectID), "token": .string(fact.token)]
            // The expiry sweep's events have no message.
            if !messageID.isEmpty { data["messageId"] = .string(messageID) }
            switch fact.type {
            case .tokenUnregistered: data["reason"] = .string(fact.error)
            default: data["error"] = .string(fact.error)
            }
            return (fact.type, data)
        }
        if finished, let counts {
            var data: [String: WebhookJSON] = [
                "projectId": .string(projectID), "messageId": .string(messageID),
                "delivered": .number(counts.delivered), "failed": .number(counts.failed),
            ]
            if counts.cancelled > 0 { data["cancelled"] = .number(counts.cancelled) }
            events.append((.messageCompleted, data))
        }
        var rows: [Row] = []
        var dropped: [Int64: Int] = [:]
        var room = Dictionary(
            uniqueKeysWithValues: targets.map { ($0.rowID, WebhookRules.backlogPerWebhook - $0.backlog) })
        let timestamp = WebhookJSON.timestamp(now)
        for event in events {
            let subscribed = targets.filter { $0.events & event.type.bit != 0 }
            guard !subscribed.isEmpty else { continue }
            let payload = WebhookJSON.object([
                "type": .string(event.type.rawValue), "timestamp": .string(timestamp), "data": .object(event.data),
            ]).text
            let eventID = WebhookRules.makeID(prefix: "msg_")
            for target in subscribed {
                guard room[target.rowID, default: 0] > 0 else {
                    dropped[target.rowID, default: 0] += 1
                    continue
                }
                room[target.rowID, default: 0] -= 1
                rows.append(Row(webhook: target.rowID, eventID: eventID, type: event.type.rawValue, payload: payload))
            }
        }
        return (rows, dropped)
    }
}

/// The little JSON an event's body needs, written with its keys in a fixed order (`type`,
/// `timestamp`, `data`; then by name) so that a body reads the same on every store.
public indirect enum WebhookJSON: Sendable, Hashable {
    case string(String)
    case number(Int)
    case object([String: WebhookJSON])

    /// The JSON text.
    public var text: String {
        switch self {
        case .string(let value):
            // JSONSerialization escapes as JSON requires; a fragment of one string.
            let data =
                (try? JSONSerialization.data(withJSONObject: value, options: [.fragmentsAllowed])) ?? Data("\"\"".utf8)
            return String(decoding: data, as: UTF8.self)
        case .number(let value):
            return String(value)
        case .object(let members):
            let first = ["type", "timestamp", "data"]
            let keys = first.filter { members[$0] != nil } + members.keys.filter { !first.contains($0) }.sorted()
            return "{" + keys.map { WebhookJSON.string($0).text + ":" + members[$0]!.text }.joined(separator: ",") + "}"
        }
    }

    /// RFC 3339 in UTC with milliseconds: `2026-11-27T01:23:45.678Z`.
    static func timestamp(_ milliseconds: Int64) -> String {
        let seconds = milliseconds.quotientAndRemainder(dividingBy: 1000)
        let (whole, fraction) = seconds.remainder < 0 ? (seconds.quotient - 1, seconds.remainder + 1000) : seconds
        let date = Date(timeIntervalSince1970: TimeInterval(whole))
        let text = date.formatted(Date.ISO8601FormatStyle(timeZone: TimeZone(identifier: "UTC")!))
        let millis = String(fraction)
        return String(text.dropLast()) + "." + String(repeating: "0", count: 3 - millis.count) + millis + "Z"
    }
}
