import Conditions
import FCMWire
import Foundation
import Hummingbird
import Registry

/// The legacy HTTP protocol's `POST /fcm/send`, JSON and plain text: a thin codec over the
/// message pipeline, answering as tables 4–9 of the HTTP reference say.
struct LegacySendController {
    let registry: RegistryService

    func addRoutes(to routes: RouteRecorder) {
        routes.on("/fcm/send", .post, use: send)
    }

    @Sendable func send(_ request: Request, context: RegistryRequestContext) async throws -> Response {
        let project = try context.requireProject()
        let key = try IdempotentSends.key(of: request, family: .legacy)
        var request = request
        let buffer = try await request.collectBody(upTo: registry.limits.requestBodyBytes)
        let contentType = request.headers[.contentType]?.lowercased() ?? ""
        if contentType.hasPrefix("application/x-www-form-urlencoded") || contentType.hasPrefix("text/plain") {
            let body = String(decoding: buffer.readableBytesView, as: UTF8.self)
            let keyed = key.map {
                IdempotentRequest(
                    key: $0, route: "POST /fcm/send form", canonicalBody: IdempotentSends.canonicalForm(body))
            }
            return try await sendPlainText(body, project: project, keyed: keyed)
        }
        let fields = try JSONBody.object(buffer)
        let keyed = key.map {
            IdempotentRequest(key: $0, route: "POST /fcm/send", canonicalBody: IdempotentRequest.canonical(fields))
        }
        return try await IdempotentSends.answer(keyed, family: .legacy, project: project, registry: registry) { keyed in
            let message = try Self.message(fields)
            let wording: IdempotentSends.Wording = { try Self.jsonAnswer($0, to: message) }
            let result = try await registry.send(
                message, via: .legacy, in: project, idempotency: IdempotentSends.keyed(keyed, wording))
            return (result, wording)
        }
    }

    /// A JSON request's message, or the 400 FCM answers for it.
    static func message(_ fields: [String: JSONValue]) throws(APIError) -> Message {
        do {
            return try LegacyCodec.message(json: fields)
        } catch {
            throw refusal(error)
        }
    }

    /// The answer to a JSON request: tables 5 and 6, with FCM's headers.
    static func jsonAnswer(_ result: SendResult, to message: Message) throws -> StoredAnswer {
        var answer = try Self.answer(result, to: message)
        // An Unavailable or rate-exceeded result asks the sender to wait, as FCM does, in a header.
        let waits = (result.tokenProblems + [result.problem]).compactMap { $0?.retryAfter }
        if let seconds = waits.max() { answer.headers.append(["Retry-After", String(seconds)]) }
        // A relay whose outbox is full took nothing: the request itself is refused, as a 503.
        if case .outboxFull? = result.problem { answer.status = 503 }
        return answer
    }

    /// Tables 5 and 6 for JSON requests; 400 `InvalidParameters` for a request FCM could not take.
    static func answer(_ result: SendResult, to message: Message) throws -> StoredAnswer {
        if let problem = result.problem, problem.wording.legacyRefusesRequest { throw refusal(problem) }
        if result.isDeviceGroup {
            guard let problem = result.problem else {
                guard !result.failedMembers.isEmpty else {
                    return try JSONResponse.anyAnswer(["success": result.recipientCount, "failure": 0])
                }
                // Through the relay: the members FCM refused, as FCM's own partial answer.
                return try JSONResponse.anyAnswer([
                    "success": result.recipientCount, "failure": result.failedMembers.count,
                    "failed_registration_ids": result.failedMembers,
                ])
            }
            return try JSONResponse.anyAnswer([
                "success": 0, "failure": result.refusedMembers.count,
                "failed_registration_ids": result.refusedMembers, "error": problem.wording.legacy,
            ])
        }
        switch message.target {
        case .topic, .condition:
            if let problem = result.problem { return try JSONResponse.anyAnswer(["error": problem.wording.legacy]) }
            // The logged entry's id, as a number: FCM's legacy topic answer.
            return try JSONResponse.anyAnswer([
                "message_id": message.options.dryRun ? -1 : Int64(result.messageID) ?? -1
            ])
        case .token, .notificationKey, .registrationIDs:
            var problems = result.tokenProblems
            if problems.isEmpty, let problem = result.problem { problems = [problem] }
            return try multicast(problems, messageID: result.messageID)
        }
    }

    /// Table 5: one result per recipient, in order.
    private static func multicast(_ problems: [MessageProblem?], messageID: String) throws -> StoredAnswer {
        let results: [[String: String]] = problems.map { problem in
            problem.map { ["error": $0.wording.legacy] } ?? ["message_id": messageID]
        }
        let failures = problems.filter { $0 != nil }.count
        return try JSONResponse.anyAnswer([
            "multicast_id": Int64.random(in: 1...Int64.max), "success": problems.count - failures, "failure": failures,
            "canonical_ids": 0, "results": results,
        ])
    }

    /// A 400 for a request FCM could not take: `{"error":"InvalidParameters: …"}`.
    static func refusal(_ problem: MessageProblem) -> APIError {
        switch problem {
        case .invalidCondition(let diagnostic, let source):
            return .plain(
                .badRequest,
                "InvalidParameters: Invalid condition expression provided.\n" + diagnostic.rendered(in: source))
        case .invalidParameters(let text, _), .invalidTTL(let text):
            return .plain(.badRequest, "InvalidParameters: \(text)")
        default:
            return .plain(.badRequest, "InvalidParameters: \(problem.wording.legacy)")
        }
    }

    // MARK: - Plain text

    /// Table 3 in, tables 7 and 8 out: `id=…` or `Error=…`.
    private func sendPlainText(_ body: String, project: Project, keyed: IdempotentRequest?) async throws -> Response {
        let message: Message
        do {
            message = try LegacyCodec.message(form: body)
        } catch {
            return JSONResponse.text("Error=\(error.wording.legacy)")
        }
        guard case .token(let token) = message.target, !token.isEmpty else {
            return JSONResponse.text("Error=MissingRegistration")
        }
        return try await IdempotentSends.answer(keyed, family: .legacy, project: project, registry: registry) { keyed in
            let wording: IdempotentSends.Wording = { result in
                if let problem = result.tokenProblems.first ?? nil ?? result.problem {
                    return JSONResponse.textAnswer("Error=\(problem.wording.legacy)")
                }
                return JSONResponse.textAnswer("id=\(result.messageID)")
            }
            let result = try await registry.send(
                message, via: .legacy, in: project, idempotency: IdempotentSends.keyed(keyed, wording))
            return (result, wording)
        }
    }
}
