import FCMWire
import Foundation
import Hummingbird
import Registry

/// Native endpoints for the XMPP side: an emulated device sends upstream, an operator sees and
/// drains the project's sessions. The sessions are the XMPP server's, reached through the seam
/// (`AppServerSessions`) the composition root hands over.
struct XMPPController {
    let registry: RegistryService
    let hub: any AppServerSessions

    func addRoutes(to routes: RouteRecorder) {
        routes.on("/api/tokens/:token/upstream", .post, use: upstream)
        routes.on("/api/xmpp/connections", .get, use: connections)
        routes.on("/api/xmpp/connections:drain", .post, use: drain)
    }

    /// Upstream data is what an Android app passes to `FirebaseMessaging.send`: string values,
    /// at most 4 KB in all.
    static let upstreamDataBytes = 4096

    struct UpstreamRequest: Decodable {
        var category: String
        var data: [String: String]
        /// Chosen by the caller, or generated.
        var messageId: String?
        var timeToLive: Int?
        /// Deprecated spellings of `messageId` and `timeToLive`, still read.
        var message_id: String?
        var time_to_live: Int?
    }

    struct UpstreamResponse: ResponseEncodable {
        var messageId: String
        /// `sent` to a session, or `waiting` for one to connect or to have room.
        var status: String
        var connection: String?
        var waiting: Int?
    }

    /// `POST /api/tokens/{token}/upstream` with `{"category":"com.example.app","data":{…}}`: the
    /// device `token` sends an upstream message, which one of the project's XMPP sessions
    /// receives, on this server or another (or which waits in the store for one).
    @Sendable func upstream(_ request: Request, context: RegistryRequestContext) async throws -> EditedResponse<UpstreamResponse> {
        let project = try context.requireProject()
        let token = try request.pathValue("token", context: context)
        guard RegistrationToken.isWellFormed(token) else {
            throw RegistryError.malformedToken
        }
        let body = try await JSONBody.decode(UpstreamRequest.self, from: request, limit: registry.limits.requestBodyBytes)
        guard (1...256).contains(body.category.utf8.count) else {
            throw BadRequest.upstreamCategoryLength
        }
        let size = body.data.reduce(0) { $0 + $1.key.utf8.count + $1.value.utf8.count }
        guard size <= Self.upstreamDataBytes else {
            throw BadRequest.upstreamDataTooBig(maximumBytes: Self.upstreamDataBytes)
        }
        let givenID = body.messageId ?? body.message_id
        if let id = givenID, !(1...256).contains(id.utf8.count) {
            throw BadRequest.upstreamMessageIDLength
        }
        guard let info = try await registry.token(token, in: project), info.state == .registered else {
            throw RegistryError.tokenNotFound
        }
        let messageID = givenID ?? "u-" + UUID().uuidString.lowercased()
        let message = UpstreamMessage.fromDevice(
            token: token, category: body.category, data: body.data, messageID: messageID,
            timeToLive: body.timeToLive ?? body.time_to_live)
        switch try await hub.deliver(message, to: project) {
        case .sent(let connection):
            return EditedResponse(
                response: UpstreamResponse(messageId: messageID, status: "sent", connection: connection))
        case .waiting(let position):
            return EditedResponse(
                status: .accepted, response: UpstreamResponse(messageId: messageID, status: "waiting", waiting: position))
        case .queueFull:
            throw ErrorEnvelope.unavailable(
                .native, "\(hub.waitingPerProject) upstream messages already wait for an XMPP session")
        }
    }

    struct Connection: Encodable {
        var id: String
        var jid: String
        var connectedAt: Date
        var draining: Bool
        var pendingDownstream: Int
        var unackedUpstream: Int
    }

    struct ConnectionList: ResponseEncodable {
        var connections: [Connection]
        var waitingUpstream: Int
    }

    /// `GET /api/xmpp/connections`: the project's XMPP sessions and the upstream messages waiting.
    @Sendable func connections(_ request: Request, context: RegistryRequestContext) async throws -> ConnectionList {
        let project = try context.requireProject()
        return ConnectionList(
            connections: hub.sessions(of: project).map {
                Connection(
                    id: $0.id, jid: $0.jid, connectedAt: $0.connectedAt, draining: $0.draining,
                    pendingDownstream: $0.pendingDownstream, unackedUpstream: $0.unackedUpstream)
            },
            waitingUpstream: try await registry.waitingUpstream(in: project))
    }

    struct DrainRequest: Decodable {
        /// One connection's id; all of the project's when absent.
        var connection: String?
    }

    /// `POST /api/xmpp/connections:drain` (`{"connection":"c1"}` or `{}` for all): sends
    /// `CONNECTION_DRAINING`; each drained connection answers what is in flight, then closes.
    struct Drained: ResponseEncodable {
        var drained: [String]
    }

    @Sendable func drain(_ request: Request, context: RegistryRequestContext) async throws -> Drained {
        let project = try context.requireProject()
        let body = try await JSONBody.decode(DrainRequest.self, from: request, limit: registry.limits.requestBodyBytes)
        let drained = hub.drain(project: project, session: body.connection)
        if let id = body.connection, drained.isEmpty {
            throw ErrorEnvelope.notFound(.native, ServerWording.noDrainableConnection(id))
        }
        try await registry.recordDrain(drained, connection: body.connection, in: project, by: context.actor(request))
        return Drained(drained: drained)
    }
}
