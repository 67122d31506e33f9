import Conditions
import Foundation
import Hummingbird
import Registry

/// The legacy HTTP protocol's `POST /fcm/send`, JSON and plain text, answered as tables 4–9 of
/// the HTTP reference say. Messages are validated, resolved and, unless `dry_run`, recorded.
struct LegacySendController {
    let registry: Registry

    func addRoutes(to routes: RouteRecorder) {
        routes.on("/fcm/send", .post, use: send)
    }

    /// The legacy protocol's name for each problem (table 9).
    static func code(_ problem: MessageProblem) -> String {
        switch problem {
        case .missingRegistration: "MissingRegistration"
        case .invalidRegistration: "InvalidRegistration"
        case .notRegistered: "NotRegistered"
        case .invalidTTL: "InvalidTtl"
        case .invalidDataKey: "InvalidDataKey"
        case .messageTooBig: "MessageTooBig"
        case .invalidCondition, .invalidParameters: "InvalidParameters"
        }
    }

    @Sendable func send(_ request: Request, context: RegistryRequestContext) async throws -> Response {
        let project = try context.requireProject()
        var request = request
        let buffer = try await request.collectBody(upTo: registry.limits.requestBodyBytes)
        let body = String(decoding: buffer.readableBytesView, as: UTF8.self)
        let contentType = request.headers[.contentType]?.lowercased() ?? ""
        if contentType.hasPrefix("application/x-www-form-urlencoded") || contentType.hasPrefix("text/plain") {
            return try await sendPlainText(body, project: project)
        }
        let message: LegacyMessage
        do {
            message = try LegacyMessage(json: JSONObject(data: Data(buffer.readableBytesView)))
        } catch let problem as MessageProblem {
            throw Self.invalidParameters(problem)
        }
        return try await sendJSON(message, body: body, project: project)
    }

    // MARK: - JSON

    private func sendJSON(_ message: LegacyMessage, body: String, project: Project) async throws -> Response {
        let targets = [
            message.to != nil, message.registrationIDs != nil, message.condition != nil, message.notificationKey != nil,
        ]
        .filter { $0 }.count
        guard targets <= 1 else {
            throw Self.invalidParameters(
                .invalidParameters("give only one of to, registration_ids, condition, notification_key", field: nil))
        }
        if let ids = message.registrationIDs, ids.count > registry.limits.tokensPerBatch {
            throw Self.invalidParameters(
                .invalidParameters(
                    "registration_ids holds at most \(registry.limits.tokensPerBatch) tokens", field: "registration_ids"
                ))
        }
        let log = MessageRecorder(registry: registry, project: project, payload: body, dryRun: message.dryRun)

        if let to = message.to, to.hasPrefix("/topics/") {
            let topic = String(to.dropFirst("/topics/".count))
            guard TopicName.isValid(topic) else {
                throw Self.invalidParameters(
                    .invalidParameters("topic name must match [a-zA-Z0-9-_.~%]{1,900}", field: "to"))
            }
            return try await sendToTopics(message, target: to, log: log) {
                registry.recipientIDs(topic: topic, in: project)
            }
        }
        if let source = message.condition {
            let condition: Condition
            do {
                condition = try MessageRules.condition(source, dialect: .legacy)
            } catch {
                throw Self.invalidParameters(error)
            }
            return try await sendToTopics(message, target: source, log: log) {
                registry.recipientIDs(condition: condition, in: project)
            }
        }
        if let key = message.notificationKey ?? message.to, let group = try await groupTarget(key, project: project) {
            if let problem = try Self.contentProblem(message, toTopics: false) {
                // Token values are read only to list the failed members.
                let members = try await registry.tokenValues(group.members, in: project)
                return try JSONResponse.any([
                    "success": 0, "failure": members.count, "failed_registration_ids": members,
                    "error": Self.code(problem),
                ])
            }
            log.record(key, ids: group.members)
            return try JSONResponse.any(["success": group.members.count, "failure": 0])
        }
        if message.notificationKey != nil {
            throw Self.invalidParameters(
                .invalidParameters("notification_key is not a key this project issued", field: "notification_key"))
        }
        let tokens = message.registrationIDs ?? message.to.map { [$0] } ?? []
        guard !tokens.isEmpty else { return try Self.multicast([.missingRegistration]) }
        if let problem = try Self.contentProblem(message, toTopics: false) {
            return try Self.multicast(Array(repeating: problem, count: tokens.count))
        }
        let statuses = try await registry.recipientStatuses(tokens, in: project)
        let problems: [MessageProblem?] = zip(tokens, statuses).map { token, status in
            switch status {
            case .accepted: nil
            case .invalidRegistration: .invalidRegistration(token)
            case .notRegistered: .notRegistered(token)
            }
        }
        log.record(message.to ?? "registration_ids", tokens: zip(tokens, problems).filter { $0.1 == nil }.map(\.0))
        return try Self.multicast(problems, dryRun: message.dryRun)
    }

    /// A notification key this project issued, as a group; `nil` for anything else.
    private func groupTarget(_ key: String, project: Project) async throws -> (id: Int64, members: [UInt32])? {
        do {
            return try await registry.group(forNotificationKey: key, in: project)
        } catch RegistryError.groupNotFound {
            return (0, [])
        }
    }

    /// Table 6: `{"message_id": N}` or `{"error": "…"}`.
    private func sendToTopics(
        _ message: LegacyMessage, target: String, log: MessageRecorder, recipients: () -> [UInt32]
    ) async throws -> Response {
        if let problem = try Self.contentProblem(message, toTopics: true) {
            return try JSONResponse.any(["error": Self.code(problem)])
        }
        log.record(target, ids: recipients())
        return try JSONResponse.any(["message_id": message.dryRun ? -1 : Int64.random(in: 1...Int64.max)])
    }

    /// Table 5: one result per recipient, in order.
    private static func multicast(_ problems: [MessageProblem?], dryRun: Bool = false) throws -> Response {
        let results: [[String: String]] = problems.map { problem in
            problem.map { ["error": code($0)] } ?? ["message_id": dryRun ? "fake_message_id" : Registry.newMessageID()]
        }
        let failures = problems.filter { $0 != nil }.count
        return try JSONResponse.any([
            "multicast_id": Int64.random(in: 1...Int64.max), "success": problems.count - failures, "failure": failures,
            "canonical_ids": 0, "results": results,
        ])
    }

    private static func multicast(_ problems: [MessageProblem]) throws -> Response {
        try multicast(problems.map { Optional($0) })
    }

    /// The problem with the message's content that FCM reports per result (200 + error); a parameter
    /// of the wrong value is a 400 instead (table 9: `InvalidParameters`).
    static func contentProblem(_ message: LegacyMessage, toTopics: Bool) throws -> MessageProblem? {
        do {
            try message.checkContent(toTopics: toTopics)
            return nil
        } catch .invalidParameters(let text, let field) {
            throw invalidParameters(.invalidParameters(text, field: field))
        } catch {
            return error
        }
    }

    /// A 400 for a request FCM could not take: `{"error":"InvalidParameters: …"}`.
    static func invalidParameters(_ problem: MessageProblem) -> APIError {
        switch problem {
        case .invalidParameters(let message, _), .invalidTTL(let message):
            return .plain(.badRequest, "InvalidParameters: \(message)")
        case .invalidCondition(let diagnostic, let source):
            return .plain(
                .badRequest,
                "InvalidParameters: Invalid condition expression provided.\n" + diagnostic.rendered(in: source))
        default:
            return .plain(.badRequest, "InvalidParameters: \(code(problem))")
        }
    }

    // MARK: - Plain text

    /// Table 3 in, tables 7 and 8 out: `id=…` or `Error=…`.
    private func sendPlainText(_ body: String, project: Project) async throws -> Response {
        let message: LegacyMessage
        do {
            message = try LegacyMessage(form: body)
        } catch {
            return JSONResponse.text("Error=\(Self.code(error))")
        }
        guard let token = message.to, !token.isEmpty else { return JSONResponse.text("Error=MissingRegistration") }
        do {
            try message.checkContent(toTopics: false)
        } catch {
            return JSONResponse.text("Error=\(Self.code(error))")
        }
        switch try await registry.recipientStatuses([token], in: project)[0] {
        case .invalidRegistration: return JSONResponse.text("Error=InvalidRegistration")
        case .notRegistered: return JSONResponse.text("Error=NotRegistered")
        case .accepted:
            let id = message.dryRun ? "fake_message_id" : Registry.newMessageID()
            MessageRecorder(registry: registry, project: project, payload: body, dryRun: message.dryRun)
                .record(token, tokens: [token], id: id)
            return JSONResponse.text("id=\(id)")
        }
    }
}

/// Puts an accepted message in the message log, unless it was a dry run.
struct MessageRecorder {
    let registry: Registry
    let project: Project
    let payload: String
    let dryRun: Bool
    var protocolName = "legacy"

    func record(_ target: String, tokens: [String] = [], ids: [UInt32] = [], id: String = Registry.newMessageID()) {
        guard !dryRun else { return }
        registry.messages.record(
            LoggedMessage(
                id: id, project: project.rowID, protocolName: protocolName, target: target, payload: payload,
                tokens: tokens,
                tokenIDs: ids))
    }
}
