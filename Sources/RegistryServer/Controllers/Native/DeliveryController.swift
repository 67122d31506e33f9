import FCMWire
import Foundation
import Hummingbird
import Registry

/// What became of a message on each device, and the relay's queue: the native API's view of
/// delivery through FCM HTTP v1.
struct DeliveryController {
    let registry: RegistryService

    func addRoutes(to routes: RouteRecorder) {
        routes.on("/api/messages/:id", .get, use: message)
        routes.on("/api/messages/:id/deliveries", .get, use: deliveries)
        routes.on("/api/messages/{id}:cancel", .post, use: cancel)
        routes.on("/api/relay", .get, use: relay)
    }

    /// `GET /api/messages/{id}`: the logged message, as the listing shows it, with its delivery
    /// counts when it was relayed.
    @Sendable func message(_ request: Request, context: RegistryRequestContext) async throws
        -> MessageController.Logged
    {
        let project = try context.requireProject()
        let id = try request.pathValue("id", context: context)
        var message = MessageController.Logged(try await registry.loggedMessage(id, in: project))
        message.delivery = try await registry.delivery(ofMessage: id, in: project)
        return message
    }

    /// `POST /api/messages/{id}:cancel`: stops what has not been sent of a relayed message, and
    /// answers it as `GET /api/messages/{id}` then does, its unsent recipients counted as
    /// `cancelled`. A message whose delivery has finished, or that was logged and not relayed, is
    /// 409 `failed_precondition`.
    @Sendable func cancel(_ request: Request, context: RegistryRequestContext) async throws
        -> MessageController.Logged
    {
        let project = try context.requireProject()
        let id = try request.pathValue("id", context: context)
        var message = MessageController.Logged(try await registry.loggedMessage(id, in: project))
        guard let counts = try await registry.cancel(message: id, in: project, by: context.actor(request)) else {
            throw RegistryError.messageFinished
        }
        message.delivery = counts
        return message
    }

    struct Delivery: Encodable {
        var token: String
        var state: DeliveryState
        /// FCM's error code: the last one for a pending recipient, the final one for a failed one.
        var error: String?
        var attempts: Int
    }

    struct DeliveryList: ResponseEncodable {
        var deliveries: [Delivery]
        var nextPageToken: String?
    }

    /// `GET /api/messages/{id}/deliveries?state=pending|delivered|failed|cancelled`: the recipients in that
    /// state (default `failed`), a page at a time.
    @Sendable func deliveries(_ request: Request, context: RegistryRequestContext) async throws -> DeliveryList {
        let project = try context.requireProject()
        let id = try request.pathValue("id", context: context)
        let stateName = request.uri.queryParameters.get("state") ?? "failed"
        guard let state = DeliveryState(rawValue: stateName) else {
            throw BadRequest.unknownDeliveryState
        }
        _ = try await registry.loggedMessage(id, in: project)
        guard
            let page = try await registry.deliveries(
                ofMessage: id, state: state, in: project, page: try PageRequest(query: request))
        else { return DeliveryList(deliveries: [], nextPageToken: nil) }
        return DeliveryList(
            deliveries: page.items.map {
                Delivery(token: $0.token, state: $0.state, error: $0.error, attempts: $0.attempts)
            }, nextPageToken: page.nextPageToken(.deliveries))
    }

    struct ProjectRelay: Encodable {
        var projectId: String
        /// The channel messages leave through (`fcm-v1`), and its settings that may be shown.
        var channel: String
        var settings: [String: JSONValue]
        /// The `fcm-v1` channel's Firebase project and upstream, where scripts written before
        /// `settings` read them.
        var firebaseProjectId: String?
        var upstream: String?
        var pending: Int
        var inFlight: Int
        var delivered: Int
        var failed: Int
        var pruned: Int
        var pausedUntil: Date?
        var lastError: String?
        /// When `lastError` was recorded.
        var lastErrorAt: Date?
    }

    struct RelayList: ResponseEncodable {
        var projects: [ProjectRelay]
    }

    /// `GET /api/relay`: the caller's project's relay (an empty list when it does not relay).
    @Sendable func relay(_ request: Request, context: RegistryRequestContext) async throws -> RelayList {
        let project = try context.requireProject()
        guard let status = try await registry.relayStatus(in: project) else { return RelayList(projects: []) }
        return RelayList(projects: [
            ProjectRelay(
                projectId: status.projectID, channel: status.channel, settings: status.settings,
                firebaseProjectId: status.channel == "fcm-v1" ? status.settings["firebaseProjectId"]?.string : nil,
                upstream: status.channel == "fcm-v1" ? status.settings["upstream"]?.string : nil,
                pending: status.pending, inFlight: status.inFlight, delivered: status.delivered, failed: status.failed,
                pruned: status.pruned, pausedUntil: status.pausedUntil, lastError: status.lastError,
                lastErrorAt: status.lastErrorAt)
        ])
    }
}
