import FCMWire
import Foundation
import Hummingbird
import Registry

/// Native listings: groups and their members, topics and their subscribers.
struct InspectionController {
    let registry: RegistryService

    func addRoutes(to routes: RouteRecorder) {
        routes.on("/api/groups", .get, use: groups)
        routes.on("/api/groups/:name", .get, use: group)
        routes.on("/api/topics", .get, use: topics)
        routes.on("/api/topics/:name", .get, use: topic)
    }

    struct Member: Encodable {
        var token: String
        var since: Date
    }

    struct GroupList: Encodable {
        var groups: [GroupSummary]
        var nextPageToken: String?
    }

    struct GroupDetail: Encodable {
        var name: String
        var memberCount: Int
        var createdAt: Date
        var members: [Member]
        var nextPageToken: String?
    }

    struct TopicList: Encodable {
        var topics: [TopicSummary]
        var nextPageToken: String?
    }

    struct TopicDetail: Encodable {
        var name: String
        var subscriberCount: Int
        var createdAt: Date
        var subscribers: [Member]
        var nextPageToken: String?
    }

    @Sendable func groups(_ request: Request, context: RegistryRequestContext) async throws -> Response {
        let project = try context.requireProject()
        let (after, size) = try Self.paging(request, registry)
        let page = try await registry.groups(in: project, after: after, limit: size)
        return try JSONResponse.make(GroupList(groups: page.items, nextPageToken: page.nextAfter.map(Self.pageToken)))
    }

    @Sendable func group(_ request: Request, context: RegistryRequestContext) async throws -> Response {
        let project = try context.requireProject()
        let name = try request.pathValue("name", context: context)
        let (after, size) = try Self.paging(request, registry)
        guard
            let (group, members) = try await registry.groupMembers(
                named: name, in: project, after: after, limit: size)
        else { throw APIError.native(.notFound, "not_found", "no group named \(name)") }
        return try JSONResponse.make(
            GroupDetail(
                name: group.name, memberCount: group.memberCount, createdAt: group.createdAt,
                members: members.items.map { Member(token: $0.name, since: $0.since) },
                nextPageToken: members.nextAfter.map(Self.pageToken)))
    }

    @Sendable func topics(_ request: Request, context: RegistryRequestContext) async throws -> Response {
        let project = try context.requireProject()
        let (after, size) = try Self.paging(request, registry)
        let page = try await registry.topics(in: project, after: after, limit: size)
        return try JSONResponse.make(TopicList(topics: page.items, nextPageToken: page.nextAfter.map(Self.pageToken)))
    }

    @Sendable func topic(_ request: Request, context: RegistryRequestContext) async throws -> Response {
        let project = try context.requireProject()
        let name = try request.pathValue("name", context: context)
        let (after, size) = try Self.paging(request, registry)
        guard
            let (topic, subscribers) = try await registry.topicSubscribers(
                named: name, in: project, after: after, limit: size)
        else { throw APIError.native(.notFound, "not_found", "no topic named \(name)") }
        return try JSONResponse.make(
            TopicDetail(
                name: topic.name, subscriberCount: topic.subscriberCount, createdAt: topic.createdAt,
                subscribers: subscribers.items.map { Member(token: $0.name, since: $0.since) },
                nextPageToken: subscribers.nextAfter.map(Self.pageToken)))
    }

    // MARK: - Paging

    /// `pageSize` (default 1000, at most 2000) and the decoded `pageToken`.
    static func paging(_ request: Request, _ registry: RegistryService) throws -> (after: String?, size: Int) {
        var size = registry.limits.defaultPageSize
        if let text = request.query("pageSize") {
            guard let value = Int(text), value > 0 else { throw BadRequest("pageSize must be a positive integer") }
            size = min(value, registry.limits.maximumPageSize)
        }
        guard let token = request.query("pageToken"), !token.isEmpty else { return (nil, size) }
        guard let bytes = Base64URL.decode(token), let after = String(bytes: bytes, encoding: .utf8) else {
            throw BadRequest("invalid pageToken")
        }
        return (after, size)
    }

    static func pageToken(_ cursor: String) -> String {
        Base64URL.encode(Array(cursor.utf8))
    }
}
