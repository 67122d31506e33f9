import FCMWire
import Foundation
import Hummingbird
import Registry

/// FCM's v1 topicSubscriptions API (2026):
/// `/v1/projects/{p}/registrations/{token}/topicSubscriptions[/{topic}]`.
struct TopicSubscriptionController {
    let registry: RegistryService

    private static let collection = "/v1/projects/:project/registrations/:token/topicSubscriptions"

    func addRoutes(to routes: RouteRecorder) {
        routes.on(Self.collection, .post, use: create)
        routes.on(Self.collection, .get, use: list)
        routes.on(Self.collection + "/:topic", .get, use: get)
        routes.on(Self.collection + "/:topic", .delete, use: delete)
        routes.on(Self.collection + "/:topic", .patch, use: patch)
    }

    /// Google's TopicSubscription resource.
    struct TopicSubscription: ResponseEncodable {
        var name: String
        var topic_name: String
        var create_time: String

        init(_ subscription: SubscriptionInfo, project: String) {
            name = "projects/\(project)/registrations/\(subscription.token)/topicSubscriptions/\(subscription.topic)"
            topic_name = subscription.topic
            create_time = Timestamp.rfc3339(subscription.createdAt)
        }
    }

    struct ListResponse: ResponseEncodable {
        var topic_subscriptions: [TopicSubscription]
        var next_page_token: String?
    }

    /// The path's project (checked against the key's) and token.
    private func target(_ request: Request, _ context: RegistryRequestContext) throws -> (
        Project, name: String, token: String
    ) {
        let project = try context.requireProject()
        let named = try request.pathValue("project", context: context)
        guard project.isNamed(named) else {
            throw ErrorEnvelope.projectMismatch
        }
        return (project, named, try request.pathValue("token", context: context))
    }

    /// The topic may come in the body instead of the query, in either spelling.
    struct CreateRequest: Decodable {
        var topic_name: String?
        var topicName: String?
    }

    @Sendable func create(_ request: Request, context: RegistryRequestContext) async throws -> TopicSubscription {
        let (project, name, token) = try target(request, context)
        let body = try await JSONBody.decode(CreateRequest.self, from: request, limit: registry.limits.requestBodyBytes)
        let topic = request.query("topic_name") ?? request.query("topicName") ?? body.topic_name ?? body.topicName
        guard let topic else { throw BadRequest.topicNameRequired }
        let subscription = try await registry.createSubscription(token: token, topic: topic, in: project)
        return TopicSubscription(subscription, project: name)
    }

    @Sendable func get(_ request: Request, context: RegistryRequestContext) async throws -> TopicSubscription {
        let (project, name, token) = try target(request, context)
        let topic = try request.pathValue("topic", context: context)
        guard let subscription = try await registry.subscription(token: token, topic: topic, in: project) else {
            throw RegistryError.subscriptionNotFound
        }
        return TopicSubscription(subscription, project: name)
    }

    @Sendable func list(_ request: Request, context: RegistryRequestContext) async throws -> ListResponse {
        let (project, name, token) = try target(request, context)
        var pageSize: Int?
        if let text = request.query("pageSize") ?? request.query("page_size") {
            guard let size = Int(text) else { throw BadRequest.topicPageSizeNotInteger }
            pageSize = size
        }
        var after: String?
        if let pageToken = request.query("pageToken") ?? request.query("page_token"), !pageToken.isEmpty {
            guard let bytes = Base64URL.decode(pageToken), let topic = String(bytes: bytes, encoding: .utf8) else {
                throw BadRequest.topicPageTokenInvalid
            }
            after = topic
        }
        guard let page = try await registry.subscriptions(ofToken: token, in: project, after: after, pageSize: pageSize)
        else { throw RegistryError.tokenNotFound }
        return ListResponse(
            topic_subscriptions: page.items.map { TopicSubscription($0, project: name) },
            next_page_token: page.nextAfter.map { Base64URL.encode(Array($0.utf8)) })
    }

    /// `PATCH …/topicSubscriptions/{t}`: the subscription as it is; with `allowMissing` (or
    /// `allow_missing`) a missing one is created first, otherwise it is 404. A subscription has
    /// no field a client may change, so the body (a TopicSubscription) is read for its shape only.
    @Sendable func patch(_ request: Request, context: RegistryRequestContext) async throws -> TopicSubscription {
        let (project, name, token) = try target(request, context)
        let topic = try request.pathValue("topic", context: context)
        _ = try await JSONBody.decode([String: JSONValue].self, from: request, limit: registry.limits.requestBodyBytes)
        if let existing = try await registry.subscription(token: token, topic: topic, in: project) {
            return TopicSubscription(existing, project: name)
        }
        guard request.queryFlag("allow_missing", "allowMissing") else { throw RegistryError.subscriptionNotFound }
        do {
            let created = try await registry.createSubscription(token: token, topic: topic, in: project)
            return TopicSubscription(created, project: name)
        } catch RegistryError.subscriptionExists {
            // Created by a concurrent call in between: answer what is there.
            guard let existing = try await registry.subscription(token: token, topic: topic, in: project) else {
                throw RegistryError.subscriptionNotFound
            }
            return TopicSubscription(existing, project: name)
        }
    }

    @Sendable func delete(_ request: Request, context: RegistryRequestContext) async throws -> Response {
        let (project, _, token) = try target(request, context)
        let topic = try request.pathValue("topic", context: context)
        let deleted = try await registry.deleteSubscription(token: token, topic: topic, in: project)
        guard deleted || request.queryFlag("allow_missing", "allowMissing") else {
            throw RegistryError.subscriptionNotFound
        }
        return JSONResponse.empty()
    }
}
