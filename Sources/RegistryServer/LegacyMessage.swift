import Foundation
import Registry

/// A downstream message in the fields of the legacy HTTP and XMPP protocols (table 1 of both).
struct LegacyMessage {
    var to: String?
    var registrationIDs: [String]?
    var condition: String?
    var notificationKey: String?
    var collapseKey: String?
    var priority: String?
    var contentAvailable: Bool?
    var mutableContent: Bool?
    var timeToLive: Double?
    var restrictedPackageName: String?
    var dryRun = false
    var data: [String: Any]?
    var notification: [String: Any]?
    /// XMPP only: the id the connection server acks or nacks.
    var messageID: String?
    /// XMPP only: `ack` / `nack` when the app server answers an upstream message.
    var messageType: String?

    /// Reads a JSON body; a field of the wrong type is `.invalidParameters` naming it.
    init(json body: JSONObject) throws(MessageProblem) {
        do {
            to = try body.string("to")
            registrationIDs = try body.strings("registration_ids")
            condition = try body.string("condition")
            notificationKey = try body.string("notification_key")
            collapseKey = try body.string("collapse_key")
            priority = try body.string("priority")
            contentAvailable = try body.bool("content_available")
            mutableContent = try body.bool("mutable_content")
            timeToLive = try Self.number(body["time_to_live"], "time_to_live")
            restrictedPackageName = try body.string("restricted_package_name")
            dryRun = try body.bool("dry_run") ?? false
            data = try Self.object(body["data"], "data")
            notification = try Self.object(body["notification"], "notification")
            messageID = try body.string("message_id")
            messageType = try body.string("message_type")
        } catch let error as BadRequest {
            throw .invalidParameters(error.message, field: error.field)
        } catch let error as MessageProblem {
            throw error
        } catch {
            throw .invalidParameters("\(error)", field: nil)
        }
    }

    /// Reads a plain-text (form-encoded) body: `registration_id=…&data.score=3x1&time_to_live=60` (table 3).
    init(form text: String) throws(MessageProblem) {
        var data: [String: Any] = [:]
        for pair in text.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = Self.formDecode(parts[0])
            let value = parts.count > 1 ? Self.formDecode(parts[1]) : ""
            switch key {
            case "registration_id": to = value
            case "collapse_key": collapseKey = value
            case "restricted_package_name": restrictedPackageName = value
            case "dry_run": dryRun = value == "1" || value.lowercased() == "true"
            case "time_to_live":
                guard let seconds = Double(value) else { throw .invalidTTL("time_to_live must be a number") }
                timeToLive = seconds
            default:
                if key.hasPrefix("data.") { data[String(key.dropFirst(5))] = value }
            }
        }
        self.data = data.isEmpty ? nil : data
    }

    /// The checks that do not depend on the recipients: data keys, time to live, priority, notification fields, size.
    func checkContent(toTopics: Bool) throws(MessageProblem) {
        if let data { try MessageRules.checkDataKeys(data.keys) }
        if let timeToLive { try MessageRules.checkTimeToLive(timeToLive) }
        if let priority, priority != "normal", priority != "high" {
            throw .invalidParameters("priority must be \"normal\" or \"high\"", field: "priority")
        }
        for (key, value) in notification ?? [:] {
            if key.hasSuffix("_loc_args") {
                guard value is String || (value as? [Any])?.allSatisfy({ $0 is String }) == true else {
                    throw .invalidParameters(
                        "notification.\(key) must be an array of strings", field: "notification.\(key)")
                }
            } else if !(value is String) || JSONObject.isBoolean(value) {
                throw .invalidParameters("notification.\(key) must be a string", field: "notification.\(key)")
            }
        }
        try MessageRules.checkSize(payloadBytes: payloadBytes, toTopics: toTopics)
    }

    /// UTF-8 bytes of the keys and values of `data` and `notification`.
    var payloadBytes: Int {
        [data, notification].compactMap { $0 }.reduce(0) { total, fields in
            total + fields.reduce(0) { $0 + $1.key.utf8.count + Self.byteCount(of: $1.value) }
        }
    }

    // MARK: - Helpers

    private static func byteCount(of value: Any) -> Int {
        if let string = value as? String { return string.utf8.count }
        return (try? JSONSerialization.data(withJSONObject: value, options: [.fragmentsAllowed]).count) ?? 0
    }

    private static func number(_ value: Any?, _ field: String) throws(MessageProblem) -> Double? {
        guard let value, !(value is NSNull) else { return nil }
        guard let number = value as? NSNumber, !JSONObject.isBoolean(value) else {
            throw .invalidTTL("\(field) must be a number of seconds")
        }
        return number.doubleValue
    }

    private static func object(_ value: Any?, _ field: String) throws(MessageProblem) -> [String: Any]? {
        guard let value, !(value is NSNull) else { return nil }
        guard let object = value as? [String: Any] else {
            throw .invalidParameters("\(field) must be a JSON object", field: field)
        }
        return object
    }

    private static func formDecode(_ text: Substring) -> String {
        let spaced = text.replacingOccurrences(of: "+", with: " ")
        return spaced.removingPercentEncoding ?? spaced
    }
}
