import FCMWire
import Hummingbird
import Registry

/// The Instance ID server API: batch (un)subscription, single subscription, and app-instance info.
struct InstanceIDController {
    let registry: RegistryService

    func addRoutes(to routes: RouteRecorder) {
        routes.on("/iid/v1:batchAdd", .post) { try await batch($0, $1, adding: true) }
        routes.on("/iid/v1:batchRemove", .post) { try await batch($0, $1, adding: false) }
        routes.on("/iid/v1/:token/rel/topics/:topic", .post, use: subscribeOne)
        routes.on("/iid/info/:token", .get, use: info)
    }

    struct BatchResponse: Encodable {
        var results: [[String: String]]
    }

    /// `{"to":"/topics/T","registration_tokens":[…]}`.
    struct BatchRequest: Decodable {
        var to: String?
        var registration_tokens: [String]?
    }

    func batch(_ request: Request, _ context: RegistryRequestContext, adding: Bool) async throws -> Response {
        let project = try context.requireProject()
        let body = try await JSONBody.decode(BatchRequest.self, from: request, limit: registry.limits.requestBodyBytes)
        guard let to = body.to, to.hasPrefix("/topics/") else {
            throw RegistryError.invalidTopicName
        }
        let topic = String(to.dropFirst("/topics/".count))
        guard let tokens = body.registration_tokens, !tokens.isEmpty else {
            throw ErrorEnvelope.missingInstanceIDToken
        }
        guard tokens.count <= registry.limits.tokensPerBatch else {
            throw ErrorEnvelope.tooManyTokens(limit: registry.limits.tokensPerBatch)
        }
        do {
            let outcomes =
                adding
                ? try await registry.subscribe(tokens, to: topic, in: project)
                : try await registry.unsubscribe(tokens, from: topic, in: project)
            return try JSONResponse.make(
                BatchResponse(results: outcomes.map { $0 == .ok ? [:] : ["error": $0.rawValue] }))
        } catch RegistryError.topicSubscriptionRateExceeded {
            // FCM answers a topic's subscription rate per token, as it answers every token's outcome.
            return try JSONResponse.make(
                BatchResponse(results: tokens.map { _ in ["error": "RESOURCE_EXHAUSTED"] }))
        }
    }

    @Sendable func subscribeOne(_ request: Request, context: RegistryRequestContext) async throws -> Response {
        let project = try context.requireProject()
        let token = try request.pathValue("token", context: context)
        let topic = try request.pathValue("topic", context: context)
        guard RegistrationToken.isWellFormed(token) else { throw RegistryError.malformedToken }
        switch try await registry.subscribe([token], to: topic, in: project).first {
        case .ok?: return JSONResponse.empty()
        case .notFound?: throw RegistryError.tokenNotFound
        case .tooManyTopics?: throw RegistryError.tooManyTopics(limit: registry.limits.topicsPerToken)
        case .invalidArgument?, nil: throw RegistryError.malformedToken
        }
    }

    struct InfoResponse: Encodable {
        struct Relations: Encodable {
            var topics: [String: [String: String]]
        }

        var authorizedEntity: String
        var platform: String
        var rel: Relations?
    }

    @Sendable func info(_ request: Request, context: RegistryRequestContext) async throws -> Response {
        let project = try context.requireProject()
        let token = try request.pathValue("token", context: context)
        guard RegistrationToken.isWellFormed(token) else { throw RegistryError.malformedToken }
        let notFound = ErrorEnvelope.unknownToken(.instanceID)
        guard let known = try await registry.token(token, in: project), known.state == .registered else {
            throw notFound
        }
        var response = InfoResponse(authorizedEntity: project.senderId, platform: "UNKNOWN")
        if request.queryFlag("details") {
            guard let subscriptions = try await registry.allSubscriptions(ofToken: token, in: project) else {
                throw notFound
            }
            let topics = Dictionary(
                uniqueKeysWithValues: subscriptions.map { ($0.topic, ["addDate": Timestamp.day($0.createdAt)]) })
            response.rel = .init(topics: topics)
        }
        return try JSONResponse.make(response)
    }
}
