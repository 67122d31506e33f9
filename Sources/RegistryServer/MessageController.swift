import Foundation
import Hummingbird
import Registry

/// XMPP validation, and what the message log recorded.
struct MessageController {
    let registry: RegistryService

    func addRoutes(to routes: RouteRecorder) {
        routes.on("/api/messages:validate", .post, use: validate)
        routes.on("/api/messages", .get, use: list)
        routes.on("/api/tokens/:token/messages", .get, use: listForToken)
    }

    struct ValidateRequest: Decodable {
        var `protocol`: String
        var message: [String: JSONValue]
    }

    /// `POST /api/messages:validate` with `{"protocol":"xmpp","message":{…}}`: the ack or nack body
    /// an XMPP connection server would send for that message. Nothing is recorded.
    @Sendable func validate(_ request: Request, context: RegistryRequestContext) async throws -> Response {
        let project = try context.requireProject()
        let body = try await JSONBody.decode(ValidateRequest.self, from: request, limit: registry.limits.requestBodyBytes)
        guard body.protocol == "xmpp" else {
            throw BadRequest(
                "protocol must be \"xmpp\"; validate legacy messages with dry_run on /fcm/send and v1 messages with validate_only",
                field: "protocol")
        }
        return try JSONResponse.any(await XMPPValidation.answer(to: body.message, registry: registry, project: project))
    }

    // MARK: - The message log

    struct Logged: Encodable {
        var id: String
        var `protocol`: String
        var target: String
        var receivedAt: Date
        var recipientCount: Int
        /// The normalized message, as JSON text.
        var payload: String
    }

    struct LoggedList: Encodable {
        var messages: [Logged]
        var nextPageToken: String?
    }

    static func list(_ page: Page<LoggedMessage>) throws -> Response {
        try JSONResponse.make(
            LoggedList(
                messages: page.items.map {
                    Logged(
                        id: $0.id, protocol: $0.via.rawValue, target: $0.target, receivedAt: $0.receivedAt,
                        recipientCount: $0.recipientCount, payload: $0.body)
                },
                nextPageToken: page.nextAfter))
    }

    static func paging(_ request: Request) throws -> (after: String?, size: Int) {
        var size = 100
        if let text = request.query("pageSize") {
            guard let value = Int(text), value > 0 else { throw BadRequest("pageSize must be a positive integer") }
            size = min(value, 1000)
        }
        return (request.query("pageToken"), size)
    }

    @Sendable func list(_ request: Request, context: RegistryRequestContext) async throws -> Response {
        let project = try context.requireProject()
        let (after, size) = try Self.paging(request)
        return try Self.list(try await registry.loggedMessages(.all, in: project, after: after, limit: size))
    }

    @Sendable func listForToken(_ request: Request, context: RegistryRequestContext) async throws -> Response {
        let project = try context.requireProject()
        let token = try request.pathValue("token", context: context)
        let (after, size) = try Self.paging(request)
        return try Self.list(try await registry.loggedMessages(to: token, in: project, after: after, limit: size))
    }
}

/// What an XMPP connection server answers a downstream stanza's JSON (table 4 of the XMPP
/// reference): the legacy codec and the pipeline, worded as an ack or a nack.
enum XMPPValidation {
    static func answer(to fields: [String: JSONValue], registry: RegistryService, project: Project) async throws
        -> [String: Any]
    {
        var answer: [String: Any] = ["message_type": "ack"]
        func nack(_ code: String, _ description: String) -> [String: Any] {
            answer["message_type"] = "nack"
            answer["error"] = code
            answer["error_description"] = description
            return answer
        }
        let messageID = try? LegacyCodec.string(fields, "message_id")
        let to = try? LegacyCodec.string(fields, "to")
        if let messageID { answer["message_id"] = messageID }
        if let to { answer["from"] = to }
        guard messageID != nil else { return nack("INVALID_JSON", "message_id is required") }
        if let type = try? LegacyCodec.string(fields, "message_type") {
            // An app server's ack of an upstream message: to, message_id and message_type "ack" only.
            if type != "ack" || to == nil {
                return nack("BAD_ACK", "an ack has message_type \"ack\", to and message_id")
            }
            return answer
        }
        var message: Message
        do {
            message = try LegacyCodec.message(json: fields)
        } catch {
            return nack(error.wording.xmpp, error.wording.description)
        }
        if case .registrationIDs(let tokens) = message.target, !tokens.isEmpty {
            return nack("INVALID_JSON", "registration_ids is not part of the XMPP protocol: send one message per token")
        }
        message.options.dryRun = true
        let result = try await registry.send(message, via: .xmpp, in: project)
        if let problem = result.tokenProblems.first ?? nil ?? result.problem {
            return nack(problem.wording.xmpp, problem.wording.description)
        }
        return answer
    }
}
