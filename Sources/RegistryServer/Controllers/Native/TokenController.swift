import FCMWire
import Foundation
import Hummingbird
import Registry

/// Native token endpoints: look a token up, register it, or report it dead.
struct TokenController {
    let registry: RegistryService

    func addRoutes(to routes: RouteRecorder) {
        routes.on("/api/tokens/:token", .get, use: show)
        routes.on("/api/tokens/:token", .put, use: register)
        routes.on("/api/tokens/:token", .delete, use: unregister)
        routes.on("/api/tokens/:token/topics", .put, use: setTopics)
        routes.on("/api/tokens/{token}:rekey", .post, use: rekey)
        routes.on("/api/tokens:rekey", .post, use: rekeyBatch)
        routes.on("/api/tokens:batchUpdate", .post, use: batchUpdate)
    }

    struct RekeyRequest: Decodable {
        var to: String?
    }

    /// `POST /api/tokens/{token}:rekey` with `{"to":"<fid>"}`: the device's topics and groups move
    /// to the new id in one transaction, and the old one is unregistered.
    /// What moved: the topics and groups `to` joined.
    struct RekeyResponse: ResponseEncodable {
        var from: String
        var to: String
        var topics: [String]
        var groups: [String]

        init(_ moved: Rekeyed) {
            (from, to, topics, groups) = (moved.from, moved.to, moved.topics, moved.groups)
        }
    }

    @Sendable func rekey(_ request: Request, context: RegistryRequestContext) async throws -> RekeyResponse {
        let (project, token) = try token(request, context)
        let body = try await JSONBody.decode(RekeyRequest.self, from: request, limit: registry.limits.requestBodyBytes)
        guard let to = body.to else { throw BadRequest.rekeyTargetRequired }
        return RekeyResponse(try await registry.rekey(token, to: to, in: project))
    }

    struct RekeyBatchRequest: Decodable {
        struct Pair: Decodable {
            var from: String
            var to: String
        }

        var pairs: [Pair]?
    }

    /// One pair's outcome in a batch: what moved, or the error a single re-key would have answered.
    struct RekeyResult: Encodable {
        var from: String
        var to: String
        var topics: [String]?
        var groups: [String]?
        var error: JSONValue?
    }

    /// `POST /api/tokens:rekey` with `{"pairs":[{"from","to"},…]}` (at most the batch limit): each
    /// pair re-keyed in a transaction of its own, one result per pair, in order.
    struct RekeyBatchResponse: ResponseEncodable {
        var results: [RekeyResult]
    }

    @Sendable func rekeyBatch(_ request: Request, context: RegistryRequestContext) async throws -> RekeyBatchResponse {
        let project = try context.requireProject()
        let body = try await JSONBody.decode(
            RekeyBatchRequest.self, from: request, limit: registry.limits.requestBodyBytes)
        guard let pairs = body.pairs, !pairs.isEmpty else {
            throw BadRequest.rekeyPairsRequired
        }
        guard pairs.count <= registry.limits.tokensPerBatch else {
            throw BadRequest.tooManyRekeyPairs(limit: registry.limits.tokensPerBatch)
        }
        var results: [RekeyResult] = []
        for pair in pairs {
            do {
                let moved = try await registry.rekey(pair.from, to: pair.to, in: project)
                results.append(RekeyResult(from: pair.from, to: pair.to, topics: moved.topics, groups: moved.groups))
            } catch let error as RegistryError {
                // Worded as the single call would have answered it.
                results.append(
                    RekeyResult(from: pair.from, to: pair.to, error: try ErrorEnvelope.nativeErrorObject(error)))
            }
        }
        return RekeyBatchResponse(results: results)
    }

    struct TopicsRequest: Decodable {
        var topics: [String]?
    }

    /// `PUT /api/tokens/{token}/topics` with `{"topics":[…]}`: exactly these topics, in one transaction.
    /// The topics `PUT …/topics` added and removed.
    struct TopicChangesResponse: ResponseEncodable {
        var added: [String]
        var removed: [String]
    }

    @Sendable func setTopics(_ request: Request, context: RegistryRequestContext) async throws -> TopicChangesResponse {
        let (project, token) = try token(request, context)
        let body = try await JSONBody.decode(TopicsRequest.self, from: request, limit: registry.limits.requestBodyBytes)
        guard let topics = body.topics else {
            throw BadRequest.topicsRequired
        }
        let changes = try await registry.setTopics(topics, ofToken: token, in: project)
        return TopicChangesResponse(added: changes.added, removed: changes.removed)
    }

    /// `GET`, `PUT` and `DELETE /api/tokens/{token}`: the token's fields, its groups and its topics.
    struct TokenResponse: ResponseEncodable {
        var fields: TokenFields
        var groups: [Membership]
        var topics: [Membership]

        private enum CodingKeys: String, CodingKey {
            case groups, topics
        }

        func encode(to encoder: any Encoder) throws {
            try fields.encode(to: encoder)
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(groups, forKey: .groups)
            try container.encode(topics, forKey: .topics)
        }
    }

    private func token(_ request: Request, _ context: RegistryRequestContext) throws -> (Project, String) {
        let project = try context.requireProject()
        let token = try request.pathValue("token", context: context)
        guard RegistrationToken.isWellFormed(token) else {
            throw RegistryError.malformedToken
        }
        return (project, token)
    }

    private func details(_ info: TokenInfo, _ project: Project) async throws -> TokenResponse {
        let groups = try await registry.groups(ofToken: info.token, in: project)
        let topics = (try await registry.allSubscriptions(ofToken: info.token, in: project) ?? [])
            .map { Membership(name: $0.topic, since: $0.createdAt) }
        let policy = try await registry.tokenPolicy(of: project)
        return TokenResponse(fields: TokenFields(info, policy: policy), groups: groups, topics: topics)
    }

    @Sendable func show(_ request: Request, context: RegistryRequestContext) async throws -> TokenResponse {
        let (project, token) = try token(request, context)
        guard let info = try await registry.token(token, in: project) else {
            throw ErrorEnvelope.unknownToken(.native)
        }
        return try await details(info, project)
    }

    /// `PUT /api/tokens/{token}`, with an optional body of attributes (`TokenAttributesCodec`):
    /// registers the token (again) and applies them; it was seen now, unless `lastSeenAt` says when.
    @Sendable func register(_ request: Request, context: RegistryRequestContext) async throws -> TokenResponse {
        let (project, token) = try token(request, context)
        let body = try await JSONBody.decode(
            [String: JSONValue].self, from: request, limit: registry.limits.requestBodyBytes)
        let change = try TokenAttributesCodec.change(from: body)
        let info = try await registry.registerToken(token, change: change, in: project)
        return try await details(info, project)
    }

    /// One token's outcome in `tokens:batchUpdate`: its fields, or the error `PUT` would have answered.
    struct UpdateResult: Encodable {
        var token: String
        var fields: TokenFields?
        var error: JSONValue?

        private enum CodingKeys: String, CodingKey {
            case token, error
        }

        func encode(to encoder: any Encoder) throws {
            if let fields {
                try fields.encode(to: encoder)
            } else {
                var container = encoder.container(keyedBy: CodingKeys.self)
                try container.encode(token, forKey: .token)
                try container.encodeIfPresent(error, forKey: .error)
            }
        }
    }

    struct BatchUpdateResponse: ResponseEncodable {
        var results: [UpdateResult]
    }

    /// `POST /api/tokens:batchUpdate` with `{"tokens":[{"token", …attributes}, …]}` (at most the
    /// batch limit): what `PUT /api/tokens/{token}` does for each, in one transaction; a token or
    /// attribute the server refuses is that token's result, and the others go ahead.
    @Sendable func batchUpdate(_ request: Request, context: RegistryRequestContext) async throws
        -> BatchUpdateResponse
    {
        let project = try context.requireProject()
        let body = try await JSONBody.decode(
            [String: JSONValue].self, from: request, limit: registry.limits.requestBodyBytes)
        guard case .array(let items) = body["tokens"], !items.isEmpty else { throw BadRequest.tokenUpdatesRequired }
        guard items.count <= registry.limits.tokensPerBatch else {
            throw BadRequest.tooManyTokenUpdates(limit: registry.limits.tokensPerBatch)
        }
        var results: [UpdateResult] = []
        var accepted: [(token: String, change: TokenAttributeChange)] = []
        var acceptedAt: [Int] = []
        for (index, item) in items.enumerated() {
            guard case .object(let fields) = item, case .string(let token) = fields["token"] else {
                throw BadRequest.tokenUpdateNotObject(at: index)
            }
            results.append(UpdateResult(token: token))
            do {
                guard RegistrationToken.isWellFormed(token) else { throw RegistryError.malformedToken }
                accepted.append((token, try TokenAttributesCodec.change(from: fields)))
                acceptedAt.append(index)
            } catch let error as RegistryError {
                // Worded as the single call would have answered it.
                results[index].error = try ErrorEnvelope.nativeErrorObject(error)
            }
        }
        let infos = try await registry.updateTokens(accepted, in: project)
        let policy = try await registry.tokenPolicy(of: project)
        for (index, info) in zip(acceptedAt, infos) {
            results[index].fields = TokenFields(info, policy: policy)
        }
        return BatchUpdateResponse(results: results)
    }

    @Sendable func unregister(_ request: Request, context: RegistryRequestContext) async throws -> TokenResponse {
        let (project, token) = try token(request, context)
        guard let info = try await registry.unregisterToken(token, in: project, by: context.actor(request)) else {
            throw ErrorEnvelope.unknownToken(.native)
        }
        return try await details(info, project)
    }
}
