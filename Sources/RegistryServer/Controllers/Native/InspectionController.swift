import FCMWire
import Foundation
import Hummingbird
import Registry

/// Native listings: the caller's project, groups and their members, topics and their subscribers;
/// groups and topics by name prefix, topics also by size.
struct InspectionController {
    let registry: RegistryService

    func addRoutes(to routes: RouteRecorder) {
        routes.on("/api/project", .get, use: project)
        routes.on("/api/project", .patch, use: patchProject)
        routes.on("/api/tokens:freshness", .get, use: freshness)
        routes.on("/api/groups", .get, use: groups)
        routes.on("/api/groups/:name", .get, use: group)
        routes.on("/api/topics", .get, use: topics)
        routes.on("/api/topics/:name", .get, use: topic)
        routes.on("/api/tokens", .get, use: tokens)
    }

    /// The project the caller's key opens, and its size.
    struct ProjectSummary: ResponseEncodable {
        var projectId: String
        var senderId: String
        var registeredTokens: Int
        var topics: Int
        /// How the project's messages leave: `relayed` (delivered through FCM HTTP v1) or
        /// `recorded` (no relay: the message log only, nothing reaches a device).
        var delivery: String
        /// When the project's tokens count as stale and expire, and whether fan-outs reach stale ones.
        var tokenPolicy: TokenPolicyCodec.Shown
    }

    /// `GET /api/tokens:freshness`'s answer (`TokenFreshness`).
    struct Freshness: ResponseEncodable {
        var registered: Int
        var fresh: Int
        var stale: Int
        var expiring7d: Int
        var byMonth: [Int]
        var tokenPolicy: TokenPolicyCodec.Shown
    }

    /// `GET /api/tokens:freshness`: how many registered tokens are fresh, stale, expiring within 7
    /// days, and last seen in each of the past 12 months of 30 days (and before), under the
    /// project's token policy.
    @Sendable func freshness(_ request: Request, context: RegistryRequestContext) async throws -> Freshness {
        let project = try context.requireProject()
        let counts = try await registry.tokenFreshness(in: project)
        return Freshness(
            registered: counts.registered, fresh: counts.fresh, stale: counts.stale,
            expiring7d: counts.expiringIn7Days, byMonth: counts.byMonth,
            tokenPolicy: TokenPolicyCodec.Shown(counts.policy))
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
        /// False for a group first met through a mirrored add or remove: Google may know members
        /// that are not listed here.
        var complete: Bool
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

    /// `GET /api/project`: whose key this is, and how many registered tokens and topics (with a
    /// subscriber) the project has, from the audience index.
    @Sendable func project(_ request: Request, context: RegistryRequestContext) async throws -> ProjectSummary {
        let project = try context.requireProject()
        let size = await registry.projectSize(project)
        return ProjectSummary(
            projectId: project.projectId, senderId: project.senderId, registeredTokens: size.registeredTokens,
            topics: size.topics, delivery: try await registry.delivery(of: project).rawValue,
            tokenPolicy: TokenPolicyCodec.Shown(try await registry.tokenPolicy(of: project)))
    }

    /// `PATCH /api/project` with `{"tokenPolicy":{…}}`: changes the settings named (the others keep
    /// their value; `"expireAfter": null` turns expiry off), audited as `tokenPolicy.changed`; a
    /// refused value is 400 naming the field, and nothing changes. Answers the project as `GET` does.
    @Sendable func patchProject(_ request: Request, context: RegistryRequestContext) async throws -> ProjectSummary {
        let project = try context.requireProject()
        let body = try await JSONBody.decode(
            [String: JSONValue].self, from: request, limit: registry.limits.requestBodyBytes)
        guard body.keys.allSatisfy({ $0 == "tokenPolicy" }) else { throw BadRequest.projectPatchKeys }
        let change = try TokenPolicyCodec.change(from: body["tokenPolicy"])
        try await registry.setTokenPolicy(change, for: project, by: context.actor(request))
        return try await self.project(request, context: context)
    }

    @Sendable func groups(_ request: Request, context: RegistryRequestContext) async throws -> GroupList {
        let project = try context.requireProject()
        let (after, size) = try paging(request, .groups)
        let page = try await registry.groups(in: project, prefix: try Self.prefix(request), after: after, limit: size)
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
            name: group.name, memberCount: group.memberCount, createdAt: group.createdAt, complete: group.complete,
            members: members.items.map { Member(token: $0.name, since: $0.since) },
            nextPageToken: members.nextPageToken(.groupMembers))
    }

    @Sendable func topics(_ request: Request, context: RegistryRequestContext) async throws -> TopicList {
        let project = try context.requireProject()
        let prefix = try Self.prefix(request)
        switch request.query("orderBy") ?? "name" {
        case "name":
            let (after, size) = try paging(request, .topics)
            let page = try await registry.topics(in: project, prefix: prefix, after: after, limit: size)
            return TopicList(topics: page.items, nextPageToken: page.nextPageToken(.topics))
        case "subscriberCount":
            let (position, size) = try paging(request, .topicsBySubscribers)
            let after = try position.map { position in
                guard let rank = TopicRank(position: position) else { throw RegistryError.invalidPageToken }
                return rank
            }
            let page = try await registry.topicsBySubscribers(in: project, prefix: prefix, after: after, limit: size)
            return TopicList(topics: page.items, nextPageToken: page.nextPageToken(.topicsBySubscribers))
        default:
            throw BadRequest.unknownTopicOrder
        }
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

    struct TokenList: ResponseEncodable {
        var tokens: [TokenFields]
        var nextPageToken: String?
    }

    /// `GET /api/tokens?prefix=P`: the project's tokens by value, registered or not, a page at a time.
    @Sendable func tokens(_ request: Request, context: RegistryRequestContext) async throws -> TokenList {
        let project = try context.requireProject()
        let prefix = try Self.prefix(request)
        let (after, size) = try paging(request, .tokens)
        let page = try await registry.tokens(in: project, prefix: prefix, after: after, limit: size)
        let policy = try await registry.tokenPolicy(of: project)
        return TokenList(
            tokens: page.items.map { TokenFields($0, policy: policy) }, nextPageToken: page.nextPageToken(.tokens))
    }

    // MARK: - Paging

    /// The longest `prefix` taken: longer than any name the registry holds.
    static let maximumPrefixBytes = 1024

    /// `prefix`: only names that start with it are listed (all, when absent or empty).
    static func prefix(_ request: Request) throws -> String {
        let prefix = request.query("prefix") ?? ""
        guard prefix.utf8.count <= maximumPrefixBytes else {
            throw BadRequest.prefixTooLong(maximumBytes: maximumPrefixBytes)
        }
        return prefix
    }

    /// `pageSize` (default 1000, at most 2000) and where `pageToken` says to continue.
    private func paging(_ request: Request, _ listing: PageToken.Listing) throws -> (after: String?, size: Int) {
        let page = try PageRequest(query: request)
        return (
            try page.position(in: listing),
            page.size(default: registry.limits.defaultPageSize, maximum: registry.limits.maximumPageSize)
        )
    }
}
