import FCMWire
import Hummingbird
import Logging
import NIOCore
import Registry

/// Turns every error a route throws into a response in the envelope of the request's API family.
struct ErrorEnvelopeMiddleware: RouterMiddleware {
    typealias Context = RegistryRequestContext

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response)
        async throws -> Response
    {
        do {
            return try await next(request, context)
        } catch {
            return ErrorEnvelope.apiError(for: error, request: request, logger: context.logger).response
        }
    }
}

/// How each API family words each error. This is the only place that does.
enum ErrorEnvelope {
    static func apiError(for error: any Error, request: Request, logger: Logger) -> APIError {
        let family = APIFamily(path: request.uri.path)
        switch error {
        case let error as APIError:
            return error
        case let error as BadRequest:
            return badRequest(family, error.message, field: error.field)
        case let error as RegistryError:
            return registryError(error, family)
        case is NIOTooManyBytesError:
            return tooLarge(family)
        case let error as any StoreConnectionFailure where error.meansUnavailable:
            // The outage itself is logged once, where it is noticed; each refused request has its
            // 503 in its access line, and its cause here for whoever debugs.
            logger.debug("the database cannot be reached", metadata: ["error": "\(error.summary)"])
            return unavailable(family, "the database cannot be reached; try again shortly")
        case let error as MirrorUnreachable:
            // The project mirrors Google's device groups, and Google gave no answer: nothing changed.
            logger.warning("the device-group mirror cannot reach Google", metadata: ["error": "\(error.reason)"])
            return unavailable(family, "Google's device-group API cannot be reached; nothing was changed; try again shortly")
        case let error as HTTPError where error.status == .notFound:
            return notFound(family, "no such endpoint: \(request.method) \(request.uri.path)")
        case let error as MethodNotAllowed:
            var response = methodNotAllowed(family, request: request)
            response.headers[.allow] = error.allowed.map(\.rawValue).sorted().joined(separator: ", ")
            return response
        case let error as HTTPError where error.status.code < 500:
            return badRequest(family, error.body ?? error.status.reasonPhrase, status: error.status)
        default:
            logger.error("request failed", metadata: ["error": "\(String(reflecting: error))"])
            return internalError(family)
        }
    }

    // MARK: - Domain errors

    /// A refusal in the family's envelope: FCM's own words where a family has them, else the
    /// registry's (`RefusalWording`, the table the command line words refusals from too).
    /// The `error` object of the native API's answer to `error`: what a batch route puts in the
    /// result of an entry the single call would have refused.
    static func nativeErrorObject(_ error: RegistryError) throws -> JSONValue? {
        try JSONBody.object(registryError(error, .native).body)["error"]
    }

    static func registryError(_ error: RegistryError, _ family: APIFamily) -> APIError {
        switch (error, family) {
        case (.invalidTopicName, .instanceID):
            return .plain(.badRequest, "Topic name format is invalid")
        case (.malformedToken, .instanceID):
            return .plain(.badRequest, "InvalidToken")
        case (.malformedToken, .legacy), (.malformedToken, .v1):
            return badRequest(
                family, "The registration token is not a valid FCM registration token", field: "registration")
        case (.tokenNotFound, .v1), (.subscriptionNotFound, .v1):
            return .google(.notFound, "NOT_FOUND", "Requested entity was not found.")
        case (.tokenNotFound, .instanceID):
            return .plain(.notFound, "NOT_FOUND")
        case (.tooManyTopics, .instanceID):
            return .plain(.badRequest, "TOO_MANY_TOPICS")
        case (.tooManyTopics(let limit), .v1):
            return .google(
                .badRequest, "FAILED_PRECONDITION",
                "The registration is already subscribed to the maximum of \(limit) topics.")
        case (.subscriptionExists, .v1):
            return .google(.conflict, "ALREADY_EXISTS", "Requested entity already exists")
        case (.topicSubscriptionRateExceeded(let retryAfter), .instanceID),
            (.topicSubscriptionRateExceeded(let retryAfter), .v1):
            // FCM's code for it is RESOURCE_EXHAUSTED in both families; a topicSubscriptions error
            // carries no FcmError detail, so the SDKs read the status name.
            var refusal: APIError =
                family == .v1
                ? .google(.tooManyRequests, "RESOURCE_EXHAUSTED", error.wording.message)
                : .plain(.tooManyRequests, "RESOURCE_EXHAUSTED")
            if let retryAfter { refusal.headers[.retryAfter] = String(retryAfter) }
            return refusal
        default:
            let wording = error.wording
            switch wording.kind {
            case .invalid: return badRequest(family, wording.message, field: wording.field)
            case .notFound: return notFound(family, wording.message)
            case .conflict: return .native(.conflict, "already_exists", wording.message)
            case .failedPrecondition: return .native(.conflict, "failed_precondition", wording.message)
            case .unavailable: return unavailable(family, wording.message)
            }
        }
    }

    // MARK: - What controllers refuse by name

    /// A `{p}` path segment that is not the key's project (v1 routes).
    static let projectMismatch = APIError.google(
        .forbidden, "PERMISSION_DENIED", "The caller does not have permission: the server key belongs to another project")

    /// A token the project has never used (native), or not registered (Instance ID's info).
    static func unknownToken(_ family: APIFamily) -> APIError {
        switch family {
        case .instanceID: .plain(.notFound, "No information found about this instance id.")
        default: notFound(family, "the project does not know this token")
        }
    }

    static func noGroup(named name: String) -> APIError {
        notFound(.native, "no group named \(name)")
    }

    static func noTopic(named name: String) -> APIError {
        notFound(.native, "no topic named \(name)")
    }

    /// Instance ID's batch calls without tokens, and with more than a batch holds.
    static let missingInstanceIDToken = APIError.plain(.badRequest, "MissingIIdToken")

    static func tooManyTokens(limit: Int) -> APIError {
        .plain(.badRequest, "too many registration tokens: at most \(limit) per request")
    }

    /// A request past authentication without a project: a route outside `AuthMiddleware` asked for one.
    static let unauthenticated = APIError.native(.unauthorized, "unauthenticated", "no server key")

    // MARK: - Request-level errors

    static func badRequest(
        _ family: APIFamily, _ message: String, field: String? = nil, status: HTTPResponse.Status = .badRequest
    )
        -> APIError
    {
        switch family {
        case .legacy, .instanceID:
            return .plain(status, message)
        case .v1:
            return .google(
                status, status == .badRequest ? "INVALID_ARGUMENT" : "FAILED_PRECONDITION", message,
                fieldViolations: field.map { [($0, message)] } ?? [])
        case .native:
            return .native(status, "invalid_argument", message)
        }
    }

    static func notFound(_ family: APIFamily, _ message: String) -> APIError {
        switch family {
        case .legacy: .plain(.notFound, message)
        case .instanceID: .plain(.notFound, "NOT_FOUND")
        case .v1: .google(.notFound, "NOT_FOUND", message)
        case .native: .native(.notFound, "not_found", message)
        }
    }

    /// 503 with `Retry-After`: the request changed nothing and may be sent again.
    static func unavailable(_ family: APIFamily, _ message: String) -> APIError {
        var error: APIError
        switch family {
        case .legacy: error = .plain(.serviceUnavailable, "Unavailable: \(message)")
        case .instanceID: error = .plain(.serviceUnavailable, "UNAVAILABLE")
        case .v1: error = .google(.serviceUnavailable, "UNAVAILABLE", message, fcmErrorCode: "UNAVAILABLE")
        case .native: error = .native(.serviceUnavailable, "unavailable", message)
        }
        error.headers[.retryAfter] = "1"
        return error
    }

    static func forbidden(_ family: APIFamily, _ message: String) -> APIError {
        switch family {
        case .legacy, .instanceID: .plain(.forbidden, message)
        case .v1: .google(.forbidden, "PERMISSION_DENIED", message)
        case .native: .native(.forbidden, "permission_denied", message)
        }
    }

    static func tooLarge(_ family: APIFamily) -> APIError {
        let message = "the request body is too large"
        switch family {
        case .legacy, .instanceID: return .plain(.contentTooLarge, message)
        case .v1: return .google(.contentTooLarge, "INVALID_ARGUMENT", message)
        case .native: return .native(.contentTooLarge, "payload_too_large", message)
        }
    }

    static func methodNotAllowed(_ family: APIFamily, request: Request) -> APIError {
        let message = "\(request.method) is not allowed on \(request.uri.path)"
        switch family {
        case .legacy, .instanceID: return .plain(.methodNotAllowed, message)
        case .v1: return .google(.methodNotAllowed, "INVALID_ARGUMENT", message)
        case .native: return .native(.methodNotAllowed, "method_not_allowed", message)
        }
    }

    static func internalError(_ family: APIFamily) -> APIError {
        let message = "internal error; the server log has the details"
        switch family {
        case .legacy: return .plain(.internalServerError, message)
        case .instanceID: return .plain(.internalServerError, "INTERNAL")
        case .v1: return .google(.internalServerError, "INTERNAL", message)
        case .native: return .native(.internalServerError, "internal", message)
        }
    }
}

/// Thrown by the catch-all routes of a known path that does not take the request's method.
struct MethodNotAllowed: Error, Sendable {
    var allowed: [HTTPRequest.Method]
}
