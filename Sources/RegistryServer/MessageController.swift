import Conditions
import Foundation
import Hummingbird
import Registry

/// XMPP validation, and what the message log recorded.
struct MessageController {
    let registry: Registry

    func addRoutes(to routes: RouteRecorder) {
        routes.on("/api/messages:validate", .post, use: validate)
        routes.on("/api/messages", .get, use: list)
        routes.on("/api/tokens/:token/messages", .get, use: listForToken)
    }

    /// The XMPP name of each problem (table 4 of the XMPP reference).
    static func xmppCode(_ problem: MessageProblem) -> String {
        switch problem {
        case .invalidRegistration: "BAD_REGISTRATION"
        case .notRegistered: "DEVICE_UNREGISTERED"
        case .missingRegistration, .invalidTTL, .invalidDataKey, .messageTooBig, .invalidCondition, .invalidParameters:
            "INVALID_JSON"
        }
    }

    static func xmppDescription(_ problem: MessageProblem) -> String {
        switch problem {
        case .missingRegistration: "Missing registration token: set to or condition"
        case .invalidRegistration(let token): "Invalid registration token \(token.prefix(40))"
        case .notRegistered: "Device unregistered"
        case .invalidTTL(let message): message
        case .invalidDataKey(let key):
            "Invalid data key \"\(key)\": from, message_type and keys starting with google or gcm are reserved"
        case .messageTooBig(let size, let limit): "Message too big: \(size) bytes of payload, the limit is \(limit)"
        case .invalidCondition(let diagnostic, _):
            "Invalid condition: \(diagnostic.message) at byte \(diagnostic.range.offset)"
        case .invalidParameters(let message, _): message
        }
    }

    /// `POST /api/messages:validate` with `{"protocol":"xmpp","message":{…}}`: the ack or nack body
    /// an XMPP connection server would send for that message. Nothing is recorded.
    @Sendable func validate(_ request: Request, context: RegistryRequestContext) async throws -> Response {
        let project = try context.requireProject()
        let body = try await JSONObject(request: request, limit: registry.limits.requestBodyBytes)
        guard try body.string("protocol") == "xmpp" else {
            throw BadRequest(
                "protocol must be \"xmpp\"; validate legacy messages with dry_run on /fcm/send and v1 messages with validate_only",
                field: "protocol")
        }
        guard let fields = body["message"] as? [String: Any] else { throw BadRequest("message must be a JSON object") }
        let messageObject = JSONObject(fields: fields)
        var answer: [String: Any] = ["message_type": "ack"]
        let message: LegacyMessage
        do {
            message = try LegacyMessage(json: messageObject)
        } catch {
            return try JSONResponse.any([
                "message_type": "nack", "error": Self.xmppCode(error), "error_description": Self.xmppDescription(error),
            ])
        }
        if let id = message.messageID { answer["message_id"] = id }
        if let to = message.to { answer["from"] = to }
        guard message.messageID != nil else {
            answer["message_type"] = "nack"
            answer["error"] = "INVALID_JSON"
            answer["error_description"] = "message_id is required"
            return try JSONResponse.any(answer)
        }
        if let type = message.messageType {
            // An app server's ack of an upstream message: to, message_id and message_type "ack" only.
            if type != "ack" || message.to == nil {
                answer["message_type"] = "nack"
                answer["error"] = "BAD_ACK"
                answer["error_description"] = "an ack has message_type \"ack\", to and message_id"
            }
            return try JSONResponse.any(answer)
        }
        if let problem = await problem(with: message, project: project) {
            answer["message_type"] = "nack"
            answer["error"] = Self.xmppCode(problem)
            answer["error_description"] = Self.xmppDescription(problem)
        }
        return try JSONResponse.any(answer)
    }

    /// The first problem an XMPP connection server would nack the message for.
    private func problem(with message: LegacyMessage, project: Project) async -> MessageProblem? {
        do {
            if message.registrationIDs != nil {
                throw MessageProblem.invalidParameters(
                    "registration_ids is not part of the XMPP protocol: send one message per token",
                    field: "registration_ids")
            }
            if let to = message.to, to.hasPrefix("/topics/") {
                guard TopicName.isValid(to.dropFirst(8)) else {
                    throw MessageProblem.invalidParameters("Invalid topic name", field: "to")
                }
                try message.checkContent(toTopics: true)
            } else if let condition = message.condition {
                _ = try MessageRules.condition(condition, dialect: .legacy)
                try message.checkContent(toTopics: true)
            } else if let to = message.to {
                try message.checkContent(toTopics: false)
                if (try? await registry.group(forNotificationKey: to, in: project)) != nil { return nil }
                switch try await registry.recipientStatuses([to], in: project)[0] {
                case .invalidRegistration: throw MessageProblem.invalidRegistration(to)
                case .notRegistered: throw MessageProblem.notRegistered(to)
                case .accepted: break
                }
            } else {
                throw MessageProblem.missingRegistration
            }
            return nil
        } catch let problem as MessageProblem {
            return problem
        } catch {
            return .invalidParameters("\(error)", field: nil)
        }
    }

    // MARK: - The message log

    struct Logged: Encodable {
        var id: String
        var `protocol`: String
        var target: String
        var receivedAt: Date
        var recipientCount: Int
        var payload: String
    }

    struct LoggedList: Encodable {
        var messages: [Logged]
    }

    static func logged(_ message: LoggedMessage) -> Logged {
        Logged(
            id: message.id, protocol: message.protocolName, target: message.target, receivedAt: message.receivedAt,
            recipientCount: message.recipientCount, payload: message.payload)
    }

    static func limit(_ request: Request) throws -> Int {
        guard let text = request.query("pageSize") else { return 100 }
        guard let value = Int(text), value > 0 else { throw BadRequest("pageSize must be a positive integer") }
        return min(value, 1000)
    }

    @Sendable func list(_ request: Request, context: RegistryRequestContext) async throws -> Response {
        let project = try context.requireProject()
        let messages = registry.messages.messages(in: project.rowID, limit: try Self.limit(request))
        return try JSONResponse.make(LoggedList(messages: messages.map(Self.logged)))
    }

    @Sendable func listForToken(_ request: Request, context: RegistryRequestContext) async throws -> Response {
        let project = try context.requireProject()
        let token = try request.pathValue("token", context: context)
        guard RegistrationToken.isWellFormed(token) else {
            throw BadRequest("a token is 1 to 4096 characters of A-Z a-z 0-9 _ : . -")
        }
        let id = try await registry.store.tokenID(token, in: project)
        let messages = registry.messages.messages(to: token, id: id, in: project.rowID, limit: try Self.limit(request))
        return try JSONResponse.make(LoggedList(messages: messages.map(Self.logged)))
    }
}
