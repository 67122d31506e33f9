import Conditions

/// A downstream message in no protocol's words: what the legacy HTTP (JSON and plain text), XMPP
/// and HTTP v1 codecs build from a request, and what the pipeline validates, resolves and hands to
/// a sink. The message log stores this normalized form, never the raw request body.
public struct Message: Sendable, Hashable, Encodable {
    /// Whom the message is for: exactly one way of naming recipients.
    public enum Target: Sendable, Hashable {
        /// One registration token or Firebase installation id. A notification key this project
        /// issued is accepted here too and means its device group (legacy `to`, v1 `token`).
        case token(String)
        /// Legacy `notification_key`: must be a key this project issued.
        case notificationKey(String)
        case topic(String)
        case condition(String)
        /// Legacy `registration_ids`: 1 to `Limits.tokensPerBatch` tokens, answered one by one.
        case registrationIDs([String])
    }

    public enum Priority: String, Sendable, Hashable, Codable {
        case normal
        case high
    }

    /// The delivery options the protocols share (legacy table 1, v1 `android` block).
    public struct Options: Sendable, Hashable, Encodable {
        public var collapseKey: String?
        public var priority: Priority?
        /// Seconds; the rules want a whole number from 0 to four weeks.
        public var timeToLive: Double?
        public var contentAvailable: Bool?
        public var mutableContent: Bool?
        public var restrictedPackageName: String?
        /// XMPP: ask for a delivery receipt.
        public var deliveryReceiptRequested: Bool?
        /// Validate and resolve only: nothing is recorded (legacy `dry_run`, v1 `validate_only`).
        public var dryRun = false

        public init() {}

        private enum CodingKeys: String, CodingKey {
            case collapseKey = "collapse_key", priority, timeToLive = "time_to_live"
            case contentAvailable = "content_available", mutableContent = "mutable_content"
            case restrictedPackageName = "restricted_package_name"
            case deliveryReceiptRequested = "delivery_receipt_requested", dryRun = "dry_run"
        }
    }

    public var target: Target
    public var options = Options()
    /// Legacy data values may be any JSON; v1 allows strings only (its codec checks).
    public var data: [String: JSONValue] = [:]
    public var notification: [String: JSONValue] = [:]
    /// HTTP v1 blocks (`android`, `apns`, `webpush`, `fcm_options`), kept as sent.
    public var platform: [String: JSONValue] = [:]

    public init(target: Target) {
        self.target = target
    }

    /// Whether the target is a topic or a condition: those have the smaller payload limit.
    public var isToTopics: Bool {
        switch target {
        case .topic, .condition: true
        case .token, .notificationKey, .registrationIDs: false
        }
    }

    /// The one payload rule of every protocol: UTF-8 bytes of the keys and values of `data` and
    /// `notification`, plus the JSON text of the v1 platform blocks.
    public var payloadBytes: Int {
        func fields(_ map: [String: JSONValue]) -> Int {
            map.reduce(0) { $0 + $1.key.utf8.count + $1.value.payloadBytes }
        }
        return fields(data) + fields(notification) + platform.reduce(0) { $0 + $1.value.payloadBytes }
    }

    private enum CodingKeys: String, CodingKey {
        case token, notificationKey = "notification_key", topic, condition, registrationIDs = "registration_ids"
        case options, data, notification, platform
    }

    /// The normalized form the message log keeps: the target under its own name, then what is set.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        switch target {
        case .token(let token): try container.encode(token, forKey: .token)
        case .notificationKey(let key): try container.encode(key, forKey: .notificationKey)
        case .topic(let topic): try container.encode(topic, forKey: .topic)
        case .condition(let condition): try container.encode(condition, forKey: .condition)
        case .registrationIDs(let tokens): try container.encode(tokens, forKey: .registrationIDs)
        }
        if options != Options() { try container.encode(options, forKey: .options) }
        if !data.isEmpty { try container.encode(data, forKey: .data) }
        if !notification.isEmpty { try container.encode(notification, forKey: .notification) }
        if !platform.isEmpty { try container.encode(platform, forKey: .platform) }
    }

    /// The target as its sender would write it, for logs and listings.
    public var targetDescription: String {
        switch target {
        case .token(let token): token
        case .notificationKey(let key): key
        case .topic(let topic): "/topics/\(topic)"
        case .condition(let condition): condition
        case .registrationIDs(let tokens): "registration_ids (\(tokens.count))"
        }
    }
}

/// The wire protocol a message came through: it picks the condition dialect and is recorded.
public enum MessageProtocol: String, Sendable, Hashable, Codable {
    /// `POST /fcm/send`, JSON or plain text.
    case legacy
    /// The XMPP connection server.
    case xmpp
    /// `POST /v1/projects/{p}/messages:send`.
    case v1

    /// The seeds' protocols take FCM's legacy conditions; HTTP v1 its own.
    public var conditionDialect: Conditions.Dialect {
        self == .v1 ? .v1 : .legacy
    }
}
