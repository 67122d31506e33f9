import Foundation
import Registry

/// A message as the relay sends it to FCM HTTP v1, one recipient per request: HTTP v1 messages as
/// they were sent, legacy and XMPP ones translated field by field as Google's migration guide maps
/// them (see `docs/relay.md`).
public enum V1Outgoing {
    /// The v1 `message` object without `token`, as JSON text: made once per message, when it is
    /// accepted, and completed per recipient by ``body(template:token:)``.
    /// - Parameter now: the send's time, from which `apns-expiration` counts the time to live.
    public static func template(_ message: Message, via protocolName: MessageProtocol, now: Date) -> String {
        let object = protocolName == .v1 ? asSent(message) : translated(message, now: now)
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(JSONValue.object(object))).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    /// `{"message": {…template, "token": T}}`: the template's text with the token spliced in, so
    /// that a fan-out encodes the message once, not once per recipient.
    public static func body(template: String, token: String) -> [UInt8] {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(template.utf8.count + token.utf8.count + 24)
        bytes.append(contentsOf: #"{"message":{"token":"#.utf8)
        appendQuoted(token, to: &bytes)
        let inner = template.utf8.dropFirst()  // after the template's "{"
        if inner.first != UInt8(ascii: "}") { bytes.append(UInt8(ascii: ",")) }
        bytes.append(contentsOf: inner)
        bytes.append(UInt8(ascii: "}"))
        return bytes
    }

    /// A JSON string literal; registration tokens are plain ASCII, but nothing from the network is trusted.
    static func appendQuoted(_ text: String, to bytes: inout [UInt8]) {
        bytes.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"):
                bytes.append(UInt8(ascii: "\\"))
                bytes.append(byte)
            case 0..<0x20:
                bytes.append(contentsOf: Array(String(format: "\\u%04x", byte).utf8))
            default:
                bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    /// An HTTP v1 message: its blocks as sent.
    static func asSent(_ message: Message) -> [String: JSONValue] {
        var object = message.platform
        if !message.data.isEmpty { object["data"] = .object(message.data) }
        if !message.notification.isEmpty { object["notification"] = .object(message.notification) }
        return object
    }

    /// The `notification` keys v1 keeps in its own `notification`; the others go to the platform blocks.
    private static let commonNotificationKeys: Set = ["title", "body", "image"]
    /// Legacy `notification` keys and their names in v1's `android.notification`.
    private static let androidNotificationKeys = [
        "icon": "icon", "sound": "sound", "tag": "tag", "color": "color", "click_action": "click_action",
        "body_loc_key": "body_loc_key", "body_loc_args": "body_loc_args", "title_loc_key": "title_loc_key",
        "title_loc_args": "title_loc_args", "android_channel_id": "channel_id",
    ]
    /// Legacy `notification` keys and their names in the APNs `aps.alert` dictionary.
    private static let apnsAlertKeys = [
        "title": "title", "body": "body", "body_loc_key": "loc-key", "body_loc_args": "loc-args",
        "title_loc_key": "title-loc-key", "title_loc_args": "title-loc-args", "subtitle": "subtitle",
    ]

    /// A legacy or XMPP message in v1's fields.
    static func translated(_ message: Message, now: Date) -> [String: JSONValue] {
        var object: [String: JSONValue] = [:]
        var android: [String: JSONValue] = [:]
        var androidNotification: [String: JSONValue] = [:]
        var apnsHeaders: [String: JSONValue] = [:]
        var aps: [String: JSONValue] = [:]
        var alert: [String: JSONValue] = [:]

        if !message.data.isEmpty {
            // v1 data values are strings: any other JSON value goes as its JSON text.
            object["data"] = .object(message.data.mapValues { .string($0.string ?? jsonText($0)) })
        }
        let notification = message.notification
        let common = notification.filter { commonNotificationKeys.contains($0.key) }
        if !common.isEmpty { object["notification"] = .object(common.mapValues { .string($0.string ?? jsonText($0)) }) }
        for (key, value) in notification {
            if let name = androidNotificationKeys[key] { androidNotification[name] = locArguments(key, value) }
            if let name = apnsAlertKeys[key] { alert[name] = locArguments(key, value) }
        }
        if let sound = notification["sound"] { aps["sound"] = sound }
        if let badge = notification["badge"] {
            aps["badge"] = badge.string.flatMap(Double.init).map(JSONValue.number) ?? badge
        }
        if let category = notification["click_action"] { aps["category"] = category }

        let options = message.options
        if let priority = options.priority {
            android["priority"] = .string(priority == .high ? "HIGH" : "NORMAL")
            apnsHeaders["apns-priority"] = .string(priority == .high ? "10" : "5")
        }
        if let seconds = options.timeToLive {
            android["ttl"] = .string("\(Int(seconds))s")
            apnsHeaders["apns-expiration"] = .string(String(Int(now.timeIntervalSince1970) + Int(seconds)))
        }
        if let collapseKey = options.collapseKey {
            android["collapse_key"] = .string(collapseKey)
            apnsHeaders["apns-collapse-id"] = .string(collapseKey)
        }
        if let package = options.restrictedPackageName { android["restricted_package_name"] = .string(package) }
        if options.contentAvailable == true { aps["content-available"] = .number(1) }
        if options.mutableContent == true { aps["mutable-content"] = .number(1) }

        if !androidNotification.isEmpty { android["notification"] = .object(androidNotification) }
        if !android.isEmpty { object["android"] = .object(android) }
        if !alert.isEmpty { aps["alert"] = .object(alert) }
        var apns: [String: JSONValue] = [:]
        if !apnsHeaders.isEmpty { apns["headers"] = .object(apnsHeaders) }
        if !aps.isEmpty { apns["payload"] = .object(["aps": .object(aps)]) }
        if !apns.isEmpty { object["apns"] = .object(apns) }
        return object
    }

    /// Legacy `*_loc_args` may be a JSON array or the text of one; v1 wants an array of strings.
    private static func locArguments(_ key: String, _ value: JSONValue) -> JSONValue {
        guard key.hasSuffix("_loc_args") else { return value.string.map(JSONValue.string) ?? .string(jsonText(value)) }
        var elements: [JSONValue]?
        if case .array(let array) = value {
            elements = array
        } else if let text = value.string, let parsed = try? JSONDecoder().decode(JSONValue.self, from: Data(text.utf8)),
            case .array(let array) = parsed
        {
            elements = array
        }
        return .array((elements ?? [value]).map { .string($0.string ?? jsonText($0)) })
    }

    private static func jsonText(_ value: JSONValue) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(value)).map { String(decoding: $0, as: UTF8.self) } ?? ""
    }
}
