import Conditions
import Foundation
import Hummingbird
import Registry

/// HTTP v1 `POST /v1/projects/{p}/messages:send`, with `validate_only`.
///
/// Exactly one target (`token` — a notification key there means its group —, `topic`,
/// `condition` in the v1 dialect), string-valued `data`, the platform blocks' field types, a `ttl`
/// within four weeks. Failures are Google's envelope with `fieldViolations` and FCM's error code.
struct V1SendController {
    let registry: Registry

    func addRoutes(to routes: RouteRecorder) {
        routes.on("/v1/projects/:project/messages:send", .post, use: send)
    }

    static let messageFields: Set = [
        "name", "data", "notification", "android", "webpush", "apns", "fcm_options", "fcmOptions", "token", "topic",
        "condition",
    ]

    @Sendable func send(_ request: Request, context: RegistryRequestContext) async throws -> Response {
        let project = try context.requireProject()
        let named = try request.pathValue("project", context: context)
        guard project.isNamed(named) else {
            throw APIError.google(
                .forbidden, "PERMISSION_DENIED",
                "The caller does not have permission: the server key belongs to another project")
        }
        var request = request
        let buffer = try await request.collectBody(upTo: registry.limits.requestBodyBytes)
        let body = try JSONObject(data: Data(buffer.readableBytesView))
        let validateOnly = try body.bool("validate_only") ?? body.bool("validateOnly") ?? false
        guard let message = body["message"] as? [String: Any] else {
            throw Self.invalid("message is required", field: "message")
        }
        for key in message.keys where !Self.messageFields.contains(key) {
            throw Self.invalid(
                "Invalid JSON payload received. Unknown name \"\(key)\" at 'message': Cannot find field.",
                field: "message")
        }
        try Self.checkFields(message)

        let targets = ["token", "topic", "condition"].filter { message[$0] != nil }
        guard targets.count == 1, let kind = targets.first, let target = message[kind] as? String else {
            throw Self.invalid("Exactly one of token, topic or condition must be set", field: "message")
        }
        let payloadBytes = Self.payloadBytes(message)
        let toTopics = kind != "token"
        if payloadBytes > (toTopics ? MessageRules.maximumTopicPayload : MessageRules.maximumPayload) {
            throw Self.invalid("Message is too big: \(payloadBytes) bytes of data and notification", field: "message")
        }
        let id = validateOnly ? "fake_message_id" : String(UInt64.random(in: 1...UInt64(Int64.max)))
        let recorder = MessageRecorder(
            registry: registry, project: project, payload: String(decoding: buffer.readableBytesView, as: UTF8.self),
            dryRun: validateOnly, protocolName: "v1")

        switch kind {
        case "topic":
            let topic = target.hasPrefix("/topics/") ? String(target.dropFirst(8)) : target
            guard TopicName.isValid(topic) else { throw Self.invalid("Invalid topic name", field: "message.topic") }
            recorder.record("/topics/\(topic)", ids: registry.recipientIDs(topic: topic, in: project), id: id)
        case "condition":
            let condition: Condition
            do {
                condition = try MessageRules.condition(target, dialect: .v1)
            } catch {
                guard case .invalidCondition(let diagnostic, let source) = error else { throw error }
                throw APIError.google(
                    .badRequest, "INVALID_ARGUMENT", "Request contains an invalid argument.",
                    fieldViolations: [("message.condition", "Invalid condition expression provided.")],
                    fcmErrorCode: "INVALID_ARGUMENT",
                    extraDetails: [
                        .init(
                            type: "type.googleapis.com/fcm_registry.ConditionDiagnostic",
                            diagnostic: .init(diagnostic, in: source))
                    ])
            }
            recorder.record(target, ids: registry.recipientIDs(condition: condition, in: project), id: id)
        default:
            do {
                if let group = try await registry.group(forNotificationKey: target, in: project) {
                    recorder.record(target, ids: group.members, id: id)
                    break
                }
            } catch RegistryError.groupNotFound {
                throw Self.unregistered()
            }
            switch try await registry.recipientStatuses([target], in: project)[0] {
            case .invalidRegistration:
                throw APIError.google(
                    .badRequest, "INVALID_ARGUMENT", "The registration token is not a valid FCM registration token",
                    fieldViolations: [
                        ("message.token", "The registration token is not a valid FCM registration token")
                    ],
                    fcmErrorCode: "INVALID_ARGUMENT")
            case .notRegistered:
                throw Self.unregistered()
            case .accepted:
                recorder.record(target, tokens: [target], id: id)
            }
        }
        return try JSONResponse.make(["name": "projects/\(named)/messages/\(id)"])
    }

    // MARK: - Field checks

    static func invalid(_ description: String, field: String) -> APIError {
        .google(
            .badRequest, "INVALID_ARGUMENT", description, fieldViolations: [(field, description)],
            fcmErrorCode: "INVALID_ARGUMENT")
    }

    static func unregistered() -> APIError {
        .google(.notFound, "NOT_FOUND", "Requested entity was not found.", fcmErrorCode: "UNREGISTERED")
    }

    /// The types of the message's fields and of its platform blocks.
    static func checkFields(_ message: [String: Any]) throws {
        for key in ["token", "topic", "condition", "name"] where message[key] != nil {
            guard message[key] is String else {
                throw invalid("Invalid value at 'message.\(key)' (TYPE_STRING)", field: "message.\(key)")
            }
        }
        try stringMap(message["data"], "message.data")
        if let data = message["data"] as? [String: Any] {
            do { try MessageRules.checkDataKeys(data.keys) } catch {
                throw invalid("Invalid data key: \(error)", field: "message.data")
            }
        }
        try object(message["notification"], "message.notification", strings: ["title", "body", "image"])
        if let android = try object(
            message["android"], "message.android",
            strings: ["collapse_key", "restricted_package_name", "ttl", "priority"])
        {
            try stringMap(android["data"], "message.android.data")
            try object(android["notification"], "message.android.notification", strings: [])
            if let priority = android["priority"] as? String, !["NORMAL", "HIGH"].contains(priority.uppercased()) {
                throw invalid(
                    "Invalid value at 'message.android.priority' (type.googleapis.com/google.firebase.fcm.v1.AndroidMessagePriority), \"\(priority)\"",
                    field: "message.android.priority")
            }
            if let ttl = android["ttl"] as? String {
                guard ttl.hasSuffix("s"), let seconds = Double(ttl.dropLast()), seconds >= 0 else {
                    throw invalid(
                        "Invalid value at 'message.android.ttl' (type.googleapis.com/google.protobuf.Duration), \"\(ttl)\"",
                        field: "message.android.ttl")
                }
                guard seconds <= Double(MessageRules.maximumTimeToLive) else {
                    throw invalid("TTL must be at most 4 weeks (2419200s)", field: "message.android.ttl")
                }
            }
        }
        if let apns = try object(message["apns"], "message.apns", strings: []) {
            try stringMap(apns["headers"], "message.apns.headers")
            try object(apns["payload"], "message.apns.payload", strings: [])
        }
        if let webpush = try object(message["webpush"], "message.webpush", strings: []) {
            try stringMap(webpush["headers"], "message.webpush.headers")
            try stringMap(webpush["data"], "message.webpush.data")
            try object(webpush["notification"], "message.webpush.notification", strings: [])
        }
        try object(message["fcm_options"] ?? message["fcmOptions"], "message.fcm_options", strings: ["analytics_label"])
    }

    /// A map whose values must all be strings (`data`, `headers`).
    static func stringMap(_ value: Any?, _ field: String) throws {
        guard let value else { return }
        guard let map = value as? [String: Any] else {
            throw invalid("Invalid value at '\(field)' (map<string, string>)", field: field)
        }
        for (key, entry) in map where !(entry is String) || JSONObject.isBoolean(entry) {
            throw invalid(
                "Invalid value at '\(field)[\(key)]' (TYPE_STRING): values of \(field) must be strings",
                field: "\(field)[\(key)]")
        }
    }

    /// An object whose listed fields, when present, must be strings.
    @discardableResult
    static func object(_ value: Any?, _ field: String, strings: [String]) throws -> [String: Any]? {
        guard let value else { return nil }
        guard let object = value as? [String: Any] else {
            throw invalid("Invalid value at '\(field)' (TYPE_MESSAGE)", field: field)
        }
        for key in strings where object[key] != nil && (!(object[key] is String) || JSONObject.isBoolean(object[key]!))
        {
            throw invalid("Invalid value at '\(field).\(key)' (TYPE_STRING)", field: "\(field).\(key)")
        }
        return object
    }

    static func payloadBytes(_ message: [String: Any]) -> Int {
        ["data", "notification"].compactMap { message[$0] as? [String: Any] }.reduce(0) { total, fields in
            total + fields.reduce(0) { $0 + $1.key.utf8.count + (($1.value as? String)?.utf8.count ?? 0) }
        }
    }
}
