import FCMWire
import Foundation
import HTTPTypes
import Hummingbird
import Registry

/// `GET /api/audit`: the project's audit log, newest first (`AuditLog.swift` says what is
/// recorded), and `GET /api/keys/current`: what the request's own key may do, for the console.
struct AuditController {
    let registry: RegistryService

    func addRoutes(to routes: RouteRecorder) {
        routes.on("/api/audit", .get, use: list)
        routes.on("/api/keys/current", .get, use: current)
    }

    /// The header a client names itself with in the audit log (the console sends `console`).
    static let clientHeader = HTTPField.Name("X-Registry-Client")!

    /// An entry as `GET /api/audit` shows it. `keyId` is `null` for the command line and for a
    /// service account's access token.
    struct Shown: Encodable {
        var entry: AuditEntry

        private enum CodingKeys: String, CodingKey { case at, keyId, keyName, client, action, target, details }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(entry.at, forKey: .at)
            try container.encode(entry.keyID.map(String.init), forKey: .keyId)
            try container.encode(entry.keyName, forKey: .keyName)
            try container.encode(entry.client, forKey: .client)
            try container.encode(entry.action, forKey: .action)
            try container.encode(entry.target, forKey: .target)
            try container.encode(entry.details, forKey: .details)
        }
    }

    struct List: ResponseEncodable {
        var entries: [Shown]
        var nextPageToken: String?
    }

    /// `GET /api/audit?action=key.revoked&since=2026-11-01T00:00:00Z&pageSize=50&pageToken=…`:
    /// `pageSize` 100 by default, at most 1000.
    @Sendable func list(_ request: Request, context: RegistryRequestContext) async throws -> List {
        let project = try context.requireProject()
        var action: AuditAction?
        if let name = request.query("action"), !name.isEmpty {
            guard let known = AuditAction(rawValue: name) else {
                throw BadRequest.unknownAuditAction(AuditAction.allCases.map(\.rawValue).joined(separator: ", "))
            }
            action = known
        }
        var since: Date?
        if let text = request.query("since"), !text.isEmpty {
            guard let date = Self.timestamp(text) else {
                throw BadRequest.auditSinceInvalid
            }
            since = date
        }
        let page = try await registry.auditEntries(
            in: project, action: action, since: since, page: try PageRequest(query: request))
        return List(entries: page.items.map(Shown.init), nextPageToken: page.nextPageToken(.audit))
    }

    /// An RFC 3339 time, with or without fractional seconds.
    static func timestamp(_ text: String) -> Date? {
        guard text.utf8.count <= 40 else { return nil }
        return (try? Date(text, strategy: .iso8601))
            ?? (try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)))
    }

    /// What the request's key may do: `{"id","name","scopes","accessToken"}` (`id` `null` for a
    /// service account's access token).
    struct Current: ResponseEncodable {
        var id: String?
        var name: String
        var scopes: [String]
        var accessToken: Bool

        private enum CodingKeys: String, CodingKey { case id, name, scopes, accessToken }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(id, forKey: .id)
            try container.encode(name, forKey: .name)
            try container.encode(scopes, forKey: .scopes)
            try container.encode(accessToken, forKey: .accessToken)
        }
    }

    /// `GET /api/keys/current`, for a key of any scope.
    @Sendable func current(_ request: Request, context: RegistryRequestContext) async throws -> Current {
        guard let grant = context.grant else { throw ErrorEnvelope.unauthenticated }
        return Current(
            id: grant.keyID.map(String.init), name: grant.keyName, scopes: grant.scopes.names,
            accessToken: grant.keyID == nil)
    }
}

extension RegistryRequestContext {
    /// Who the audit log names for a change this request makes: its key and the client it named.
    func actor(_ request: Request) -> AuditActor? {
        grant?.actor(client: request.headers[AuditController.clientHeader])
    }

    /// As `actor(_:)`, for routes behind `AuthMiddleware`, which always have a key.
    func requireActor(_ request: Request) throws -> AuditActor {
        guard let actor = actor(request) else { throw ErrorEnvelope.unauthenticated }
        return actor
    }
}
