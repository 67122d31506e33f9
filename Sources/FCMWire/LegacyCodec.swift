import Foundation
import Registry

/// The seeds' downstream message (table 1 of the legacy HTTP and XMPP references) read into the
/// pipeline's `Message`. A field of the wrong type is `.invalidParameters` naming it; unknown
/// fields are ignored, as FCM did.
public enum LegacyCodec {
    /// The fields of a legacy JSON body (HTTP `/fcm/send`, or the JSON inside an XMPP stanza).
    public static func message(json fields: [String: JSONValue]) throws(MessageProblem) -> Message {
        let fields = fields.filter { !$0.value.isNull }
        var targets: [Message.Target] = []
        if let to = try string(fields, "to") {
            targets.append(to.hasPrefix("/topics/") ? .topic(String(to.dropFirst("/topics/".count))) : .token(to))
        }
        if let tokens = try strings(fields, "registration_ids") { targets.append(.registrationIDs(tokens)) }
        if let condition = try string(fields, "condition") { targets.append(.condition(condition)) }
        if let key = try string(fields, "notification_key") { targets.append(.notificationKey(key)) }
        guard targets.count <= 1 else {
            throw .invalidParameters("give only one of to, registration_ids, condition, notification_key", field: nil)
        }
        var message = Message(target: targets.first ?? .registrationIDs([]))
        message.options.collapseKey = try string(fields, "collapse_key")
        if let priority = try string(fields, "priority") {
            guard let value = Message.Priority(rawValue: priority) else {
                throw .invalidParameters("priority must be \"normal\" or \"high\"", field: "priority")
            }
            message.options.priority = value
        }
        message.options.contentAvailable = try bool(fields, "content_available")
        message.options.mutableContent = try bool(fields, "mutable_content")
        message.options.deliveryReceiptRequested = try bool(fields, "delivery_receipt_requested")
        message.options.restrictedPackageName = try string(fields, "restricted_package_name")
        message.options.dryRun = try bool(fields, "dry_run") ?? false
        if let ttl = fields["time_to_live"] {
            guard case .number(let seconds) = ttl else { throw .invalidTTL("time_to_live must be a number of seconds") }
            message.options.timeToLive = seconds
        }
        message.data = try object(fields, "data") ?? [:]
        message.notification = try notification(fields)
        return message
    }

    /// A plain-text (form-encoded) body: `registration_id=…&data.score=3x1&time_to_live=60` (table 3).
    public static func message(form text: String) throws(MessageProblem) -> Message {
        var message = Message(target: .token(""))
        for pair in text.split(separator: "&", omittingEmptySubsequences: true) {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            let key = formDecode(parts[0])
            let value = parts.count > 1 ? formDecode(parts[1]) : ""
            switch key {
            case "registration_id": message.target = .token(value)
            case "collapse_key": message.options.collapseKey = value
            case "restricted_package_name": message.options.restrictedPackageName = value
            case "dry_run": message.options.dryRun = value == "1" || value.lowercased() == "true"
            case "time_to_live":
                guard let seconds = Double(value) else { throw .invalidTTL("time_to_live must be a number") }
                message.options.timeToLive = seconds
            default:
                if key.hasPrefix("data.") { message.data[String(key.dropFirst(5))] = .string(value) }
            }
        }
        return message
    }

    // MARK: - Fields

    public static func string(_ fields: [String: JSONValue], _ key: String) throws(MessageProblem) -> String? {
        guard let value = fields[key] else { return nil }
        guard case .string(let string) = value else { throw .invalidParameters("\(key) must be a string", field: key) }
        return string
    }

    private static func bool(_ fields: [String: JSONValue], _ key: String) throws(MessageProblem) -> Bool? {
        guard let value = fields[key] else { return nil }
        guard case .bool(let flag) = value else { throw .invalidParameters("\(key) must be true or false", field: key) }
        return flag
    }

    private static func strings(_ fields: [String: JSONValue], _ key: String) throws(MessageProblem) -> [String]? {
        guard let value = fields[key] else { return nil }
        guard case .array(let elements) = value else {
            throw .invalidParameters("\(key) must be an array of strings", field: key)
        }
        var strings: [String] = []
        for (index, element) in elements.enumerated() {
            guard case .string(let string) = element else {
                throw .invalidParameters("\(key)[\(index)] must be a string", field: key)
            }
            strings.append(string)
        }
        return strings
    }

    private static func object(_ fields: [String: JSONValue], _ key: String) throws(MessageProblem)
        -> [String: JSONValue]?
    {
        guard let value = fields[key] else { return nil }
        guard case .object(let object) = value else {
            throw .invalidParameters("\(key) must be a JSON object", field: key)
        }
        return object
    }

    /// Notification fields are strings, but `*_loc_args`, which are arrays of strings.
    private static func notification(_ fields: [String: JSONValue]) throws(MessageProblem) -> [String: JSONValue] {
        let notification = try object(fields, "notification") ?? [:]
        for (key, value) in notification where !value.isNull {
            let field = "notification.\(key)"
            if key.hasSuffix("_loc_args") {
                switch value {
                case .string: break
                case .array(let elements) where elements.allSatisfy({ $0.string != nil }): break
                default: throw .invalidParameters("\(field) must be an array of strings", field: field)
                }
            } else if value.string == nil {
                throw .invalidParameters("\(field) must be a string", field: field)
            }
        }
        return notification.filter { !$0.value.isNull }
    }

    private static func formDecode(_ text: Substring) -> String {
        let spaced = text.replacingOccurrences(of: "+", with: " ")
        return spaced.removingPercentEncoding ?? spaced
    }
}
