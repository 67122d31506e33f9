import Registry

/// An HTTP v1 `messages:send` body read into the pipeline's `Message`. Field types are checked as
/// Google's JSON mapping checks them; `null` means "not set" for every field.
public enum V1Codec {
    /// A request FCM v1 would refuse before looking at recipients: a field and what is wrong with it.
    public struct Invalid: Error {
        public var description: String
        public var field: String
    }

    static let messageFields: Set = [
        "name", "data", "notification", "android", "android_v2", "androidV2", "webpush", "apns", "fcm_options",
        "fcmOptions", "token", "fid", "topic", "condition",
    ]

    /// Reads `{"validate_only":…,"message":{…}}`.
    public static func message(_ body: [String: JSONValue]) throws(Invalid) -> Message {
        let body = body.filter { !$0.value.isNull }
        var validateOnly = false
        for key in ["validate_only", "validateOnly"] {
            guard let value = body[key] else { continue }
            guard case .bool(let flag) = value else { throw Invalid(description: "\(key) must be true or false", field: key) }
            validateOnly = flag
        }
        guard let fields = body["message"]?.object?.filter({ !$0.value.isNull }) else {
            throw Invalid(description: "message is required", field: "message")
        }
        for key in fields.keys where !messageFields.contains(key) {
            throw Invalid(
                description: "Invalid JSON payload received. Unknown name \"\(key)\" at 'message': Cannot find field.",
                field: "message")
        }
        for key in ["token", "fid", "topic", "condition", "name"] where fields[key] != nil && fields[key]?.string == nil {
            throw Invalid(description: "Invalid value at 'message.\(key)' (TYPE_STRING)", field: "message.\(key)")
        }
        // A Firebase installation id (`fid`) is a registration id like a token: both are opaque.
        let targets = ["token", "fid", "topic", "condition"].compactMap { key in fields[key]?.string.map { (key, $0) } }
        guard targets.count == 1, let (kind, value) = targets.first else {
            throw Invalid(description: "Exactly one of token, fid, topic or condition must be set", field: "message")
        }
        var message: Message
        switch kind {
        case "topic": message = Message(target: .topic(value.hasPrefix("/topics/") ? String(value.dropFirst(8)) : value))
        case "condition": message = Message(target: .condition(value))
        default: message = Message(target: .token(value))
        }
        message.options.dryRun = validateOnly
        message.data = try stringMap(fields["data"], "message.data")
        message.notification = try object(fields["notification"], "message.notification", strings: ["title", "body", "image"])
            ?? [:]
        if let android = try object(
            fields["android"].map(snakeCased), "message.android",
            strings: ["collapse_key", "restricted_package_name", "ttl", "priority"])
        {
            try readAndroid(android, into: &message)
        }
        if let androidV2 = fields["android_v2"] ?? fields["androidV2"] {
            try readAndroidV2(androidV2, into: &message)
        }
        if let apns = try object(fields["apns"], "message.apns", strings: []) {
            _ = try stringMap(apns["headers"], "message.apns.headers")
            _ = try object(apns["payload"], "message.apns.payload", strings: [])
            message.platform["apns"] = .object(apns)
        }
        if let webpush = try object(fields["webpush"], "message.webpush", strings: []) {
            _ = try stringMap(webpush["headers"], "message.webpush.headers")
            _ = try stringMap(webpush["data"], "message.webpush.data")
            _ = try object(webpush["notification"], "message.webpush.notification", strings: [])
            message.platform["webpush"] = .object(webpush)
        }
        if let options = try object(
            fields["fcm_options"] ?? fields["fcmOptions"], "message.fcm_options", strings: ["analytics_label"])
        {
            message.platform["fcm_options"] = .object(options)
        }
        return message
    }

    private static func readAndroid(_ android: [String: JSONValue], into message: inout Message) throws(Invalid) {
        _ = try stringMap(android["data"], "message.android.data")
        _ = try object(android["notification"], "message.android.notification", strings: [])
        if let priority = android["priority"]?.string {
            guard let value = Message.Priority(rawValue: priority.lowercased()) else {
                throw Invalid(
                    description:
                        "Invalid value at 'message.android.priority' (type.googleapis.com/google.firebase.fcm.v1.AndroidMessagePriority), \"\(priority)\"",
                    field: "message.android.priority")
            }
            message.options.priority = value
        }
        if let ttl = android["ttl"]?.string {
            guard let seconds = GoogleDuration.seconds(ttl) else {
                throw Invalid(
                    description:
                        "Invalid value at 'message.android.ttl' (type.googleapis.com/google.protobuf.Duration), \"\(ttl)\"",
                    field: "message.android.ttl")
            }
            // FCM rounds a fractional TTL down to whole seconds.
            message.options.timeToLive = seconds.rounded(.down)
        }
        message.options.collapseKey = android["collapse_key"]?.string
        message.options.restrictedPackageName = android["restricted_package_name"]?.string
        message.platform["android"] = .object(android)
    }

    /// An object's field names in snake_case: Google's JSON mapping accepts `collapseKey` and
    /// `collapse_key` alike. Keys of maps (`data`, `headers`) are the sender's and stay as sent.
    static func snakeCased(_ value: JSONValue) -> JSONValue {
        guard let object = value.object else { return value }
        let maps: Set = ["data", "headers"]
        var result: [String: JSONValue] = [:]
        for (key, field) in object {
            var snake = ""
            for character in key {
                if character.isUppercase {
                    snake += "_" + character.lowercased()
                } else {
                    snake.append(character)
                }
            }
            result[snake] = maps.contains(snake) ? field : snakeCased(field)
        }
        return .object(result)
    }

    /// A map whose values must all be strings (`data`, `headers`).
    static func stringMap(_ value: JSONValue?, _ field: String) throws(Invalid) -> [String: JSONValue] {
        guard let value, !value.isNull else { return [:] }
        guard let map = value.object else {
            throw Invalid(description: "Invalid value at '\(field)' (map<string, string>)", field: field)
        }
        for (key, entry) in map where entry.string == nil {
            throw Invalid(
                description: "Invalid value at '\(field)[\(key)]' (TYPE_STRING): values of \(field) must be strings",
                field: "\(field)[\(key)]")
        }
        return map
    }

    /// An object whose listed fields, when present, must be strings.
    static func object(_ value: JSONValue?, _ field: String, strings: [String]) throws(Invalid) -> [String: JSONValue]? {
        guard let value, !value.isNull else { return nil }
        guard let object = value.object else {
            throw Invalid(description: "Invalid value at '\(field)' (TYPE_MESSAGE)", field: field)
        }
        let set = object.filter { !$0.value.isNull }
        for key in strings where set[key] != nil && set[key]?.string == nil {
            throw Invalid(description: "Invalid value at '\(field).\(key)' (TYPE_STRING)", field: "\(field).\(key)")
        }
        return set
    }
}

/// Google's `google.protobuf.Duration` in JSON: seconds with up to nine fractional digits and an
/// `s`, such as `"3.5s"`; nothing else (no sign, exponent, hex or spaces).
enum GoogleDuration {
    static func seconds(_ text: String) -> Double? {
        var bytes = Array(text.utf8)
        guard bytes.last == UInt8(ascii: "s") else { return nil }
        bytes.removeLast()
        let parts = bytes.split(separator: UInt8(ascii: "."), maxSplits: 1, omittingEmptySubsequences: false)
        let isDigit = { (byte: UInt8) in byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }
        guard let whole = parts.first, !whole.isEmpty, whole.count <= 12, whole.allSatisfy(isDigit) else { return nil }
        if parts.count == 2 {
            guard !parts[1].isEmpty, parts[1].count <= 9, parts[1].allSatisfy(isDigit) else { return nil }
        }
        return Double(String(decoding: bytes, as: UTF8.self))
    }
}
