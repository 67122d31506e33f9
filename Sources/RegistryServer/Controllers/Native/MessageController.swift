import FCMWire
import Foundation
import Hummingbird
import Registry

/// XMPP validation, and what the message log recorded.
struct MessageController {
    let registry: RegistryService

    func addRoutes(to routes: RouteRecorder) {
        routes.on("/api/messages:validate", .post, use: validate)
        routes.on("/api/messages", .get, use: list)
        routes.on("/api/tokens/:token/messages", .get, use: listForToken)
    }

    struct ValidateRequest: Decodable {
        var `protocol`: String
        var message: [String: JSONValue]
    }

    /// `POST /api/messages:validate` with `{"protocol":"xmpp","message":{…}}`: the ack or nack body
    /// an XMPP connection server would send for that message. Nothing is recorded.
    @Sendable func validate(_ request: Request, context: RegistryRequestContext) async throws -> Response {
        let project = try context.requireProject()
        let body = try await JSONBody.decode(ValidateRequest.self, from: request, limit: registry.limits.requestBodyBytes)
        guard body.protocol == "xmpp" else {
            throw BadRequest.validateProtocolNotXMPP
        }
        return try JSONResponse.any(
            await XMPPDownstream.answer(to: body.message, registry: registry, project: project, dryRun: true).json)
    }

    // MARK: - The message log

    struct Logged: ResponseEncodable {
        var id: String
        var `protocol`: String
        var target: String
        var receivedAt: Date
        var recipientCount: Int
        /// The stale tokens a fan-out left out, the project's token policy not sending to them.
        var skippedStale: Int
        /// The normalized message, as JSON text.
        var payload: String
        /// The recipients by state; `null` when the project did not relay the message.
        var delivery: DeliveryCounts?
        /// In a token's listing: what became of the message on that token.
        var tokenDelivery: TokenFate?

        struct TokenFate: Encodable {
            var state: DeliveryState
            /// FCM's error code: the last one for a pending recipient, the final one for a failed one.
            var error: String?
            var attempts: Int
        }

        init(_ message: LoggedMessage) {
            id = message.id
            `protocol` = message.via.rawValue
            target = message.target
            receivedAt = message.receivedAt
            recipientCount = message.recipientCount
            skippedStale = message.skippedStale
            payload = message.body
            delivery = message.delivery
            tokenDelivery = message.tokenDelivery.map {
                TokenFate(state: $0.state, error: $0.error, attempts: $0.attempts)
            }
        }

        private enum CodingKeys: String, CodingKey {
            case id, `protocol`, target, receivedAt, recipientCount, skippedStale, payload, delivery, tokenDelivery
        }

        /// `delivery` as `null` when there is none, so a reader need not guess; `tokenDelivery` only
        /// in a token's listing.
        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(id, forKey: .id)
            try container.encode(`protocol`, forKey: .protocol)
            try container.encode(target, forKey: .target)
            try container.encode(receivedAt, forKey: .receivedAt)
            try container.encode(recipientCount, forKey: .recipientCount)
            try container.encode(skippedStale, forKey: .skippedStale)
            try container.encode(payload, forKey: .payload)
            try container.encode(delivery, forKey: .delivery)
            try container.encodeIfPresent(tokenDelivery, forKey: .tokenDelivery)
        }
    }

    struct LoggedList: ResponseEncodable {
        var messages: [Logged]
        var nextPageToken: String?
    }

    static func list(_ page: Page<LoggedMessage>) -> LoggedList {
        LoggedList(
                messages: page.items.map(Logged.init),
                nextPageToken: page.nextPageToken(.messages))
    }

    /// `pageSize` (default 100, at most 1000: entries carry their payloads) and where `pageToken`
    /// says to continue.
    static func paging(_ request: Request) throws -> (after: String?, size: Int) {
        let page = try PageRequest(query: request)
        return (try page.position(in: .messages), page.size(default: 100, maximum: 1000))
    }

    @Sendable func list(_ request: Request, context: RegistryRequestContext) async throws -> LoggedList {
        let project = try context.requireProject()
        let (after, size) = try Self.paging(request)
        return Self.list(try await registry.loggedMessages(.all, in: project, after: after, limit: size))
    }

    @Sendable func listForToken(_ request: Request, context: RegistryRequestContext) async throws -> LoggedList {
        let project = try context.requireProject()
        let token = try request.pathValue("token", context: context)
        let (after, size) = try Self.paging(request)
        return Self.list(try await registry.loggedMessages(to: token, in: project, after: after, limit: size))
    }
}
