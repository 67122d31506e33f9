import Conditions
import FCMWire
import Hummingbird
import Registry

/// HTTP v1 `POST /v1/projects/{p}/messages:send`, with `validate_only`: a thin codec over the
/// message pipeline. Failures are Google's envelope with `fieldViolations` and FCM's error code.
struct V1SendController {
    let registry: RegistryService

    func addRoutes(to routes: RouteRecorder) {
        routes.on("/v1/projects/:project/messages:send", .post, use: send)
    }

    /// `{"name":"projects/{p}/messages/{id}"}`, v1's answer to an accepted send.
    struct SendResponse: Encodable {
        var name: String
    }

    @Sendable func send(_ request: Request, context: RegistryRequestContext) async throws -> Response {
        let project = try context.requireProject()
        let named = try request.pathValue("project", context: context)
        guard project.isNamed(named) else {
            throw ErrorEnvelope.projectMismatch
        }
        let key = try IdempotentSends.key(of: request, family: .v1)
        let body = try await JSONBody.decode(
            [String: JSONValue].self, from: request, limit: registry.limits.requestBodyBytes)
        let keyed = key.map {
            IdempotentRequest(
                key: $0, route: "POST /v1/projects/{p}/messages:send", canonicalBody: IdempotentRequest.canonical(body))
        }
        return try await IdempotentSends.answer(keyed, family: .v1, project: project, registry: registry) { keyed in
            let message = try Self.message(body)
            let wording: IdempotentSends.Wording = { result in
                if let problem = result.tokenProblems.first ?? nil ?? result.problem { throw Self.refusal(problem) }
                return try JSONResponse.answer(SendResponse(name: "projects/\(named)/messages/\(result.messageID)"))
            }
            let result = try await registry.send(
                message, via: .v1, in: project, idempotency: IdempotentSends.keyed(keyed, wording))
            return (result, wording)
        }
    }

    /// The request's message, or v1's 400 for it.
    static func message(_ body: [String: JSONValue]) throws(APIError) -> Message {
        do {
            return try V1Codec.message(body)
        } catch {
            throw invalid(error.description, field: error.field)
        }
    }

    static func invalid(_ description: String, field: String) -> APIError {
        .google(
            .badRequest, "INVALID_ARGUMENT", description, fieldViolations: [(field, description)],
            fcmErrorCode: "INVALID_ARGUMENT")
    }

    /// A pipeline problem in v1's words.
    static func refusal(_ problem: MessageProblem) -> APIError {
        let wording = problem.wording
        switch problem {
        case .notRegistered:
            return .google(
                HTTPResponse.Status(code: wording.v1.status), wording.v1.name, "Requested entity was not found.", fcmErrorCode: wording.v1.fcmCode)
        case .senderIDMismatch:
            return .google(
                HTTPResponse.Status(code: wording.v1.status), wording.v1.name, wording.description,
                fcmErrorCode: wording.v1.fcmCode)
        case .unavailable, .internalError, .quotaExceeded, .outboxFull:
            var error = APIError.google(
                HTTPResponse.Status(code: wording.v1.status), wording.v1.name, wording.description,
                fcmErrorCode: wording.v1.fcmCode)
            if let seconds = problem.retryAfter { error.headers[.retryAfter] = String(seconds) }
            return error
        case .invalidRegistration:
            return invalid("The registration token is not a valid FCM registration token", field: problem.v1Field)
        case .invalidCondition(let diagnostic, let source):
            return .google(
                .badRequest, "INVALID_ARGUMENT", "Request contains an invalid argument.",
                fieldViolations: [(problem.v1Field, "Invalid condition expression provided.")],
                fcmErrorCode: wording.v1.fcmCode,
                extraDetails: [
                    .init(
                        type: "type.googleapis.com/fcm_registry.ConditionDiagnostic",
                        diagnostic: .init(diagnostic, in: source))
                ])
        default:
            return invalid(wording.description, field: problem.v1Field)
        }
    }
}
