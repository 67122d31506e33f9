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

    struct GroupList: ResponseEncodable {
        var groups: [GroupSummary]
        var nextPageToken: String?
    }

    struct GroupDetail: ResponseEncodable {
        var name: String
        var memberCount: Int
        var createdAt: Date
        var members: [Member]
        var nextPageToken: String?
    }

    struct TopicList: ResponseEncodable {
        var topics: [TopicSummary]
        var nextPageToken: String?
    }

    struct TopicDetail: ResponseEncodable {
        var name: String
        var subscriberCount: Int
        var createdAt: Date
        var subscribers: [Member]
        var nextPageToken: String?
    }

    @Sendable func groups(_ request: Request, context: RegistryRequestContext) async throws -> GroupList {
        let project = try context.requireProject()
        let (after, size) = try paging(request, .groups)
        let page = try await registry.groups(in: project, after: after, limit: size)
        return GroupList(groups: page.items, nextPageToken: page.nextPageToken(.groups))
    }

    @Sendable func group(_ request: Request, context: RegistryRequestContext) async throws -> GroupDetail {
        let project = try context.requireProject()
        let name = try request.pathValue("name", context: context)
        let (after, size) = try paging(request, .groupMembers)
        guard
            let (group, members) = try await registry.groupMembers(
                named: name, in: project, after: after, limit: size)
        else { throw ErrorEnvelope.noGroup(named: name) }
        return GroupDetail(
            name: group.name, memberCount: group.memberCount, createdAt: group.createdAt,
            members: members.items.map { Member(token: $0.name, since: $0.since) },
            nextPageToken: members.nextPageToken(.groupMembers))
    }

    @Sendable func topics(_ request: Request, context: RegistryRequestContext) async throws -> TopicList {
        let project = try context.requireProject()
        let (after, size) = try paging(request, .topics)
        let page = try await registry.topics(in: project, after: after, limit: size)
        return TopicList(topics: page.items, nextPageToken: page.nextPageToken(.topics))
    }

    @Sendable func topic(_ request: Request, context: RegistryRequestContext) async throws -> TopicDetail {
        let project = try context.requireProject()
        let name = try request.pathValue("name", context: context)
        let (after, size) = try paging(request, .topicSubscribers)
        guard
            let (topic, subscribers) = try await registry.topicSubscribers(
                named: name, in: project, after: after, limit: size)
        else { throw ErrorEnvelope.noTopic(named: name) }
        return TopicDetail(
            name: topic.name, subscriberCount: topic.subscriberCount, createdAt: topic.createdAt,
            subscribers: subscribers.items.map { Member(token: $0.name, since: $0.since) },
            nextPageToken: subscribers.nextPageToken(.topicSubscribers))
    }

    // MARK: - Paging

    /// `pageSize` (default 1000, at most 2000) and where `pageToken` says to continue.
    private func paging(_ request: Request, _ listing: PageToken.Listing) throws -> (after: String?, size: Int) {
        let page = try PageRequest(query: request)
        return (
            try page.position(in: listing),
            page.size(default: registry.limits.defaultPageSize, maximum: registry.limits.maximumPageSize)
        )
    }
}
