import FCMWire
import Foundation
import Hummingbird
import Registry

/// `/api/keys`: the project's server keys, for an `admin` key. A key's value is shown once, when
/// it is made (or rotated); lists show its id, name, scopes and times.
struct KeyController {
    let registry: RegistryService

    func addRoutes(to routes: RouteRecorder) {
        routes.on("/api/keys", .get, use: list)
        routes.on("/api/keys", .post, use: create)
        routes.on("/api/keys/:id", .delete, use: revoke)
        routes.on("/api/keys/{id}:rotate", .post, use: rotate)
    }

    /// `{"name": "marketing dashboard", "scopes": ["send", "read"]}`.
    struct CreateRequest: Decodable {
        var name: String?
        var scopes: [String]?
    }

    /// `{"gracePeriod": "86400s"}`; absent: the old key stops at once.
    struct RotateRequest: Decodable {
        var gracePeriod: String?
    }

    /// A key as lists show it: never its value. Absent times are `null`.
    struct Shown: Encodable {
        var record: ServerKeyRecord

        private enum CodingKeys: String, CodingKey { case id, name, scopes, createdAt, lastUsedAt, revokedAt }

        func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(String(record.id), forKey: .id)
            try container.encode(record.name, forKey: .name)
            try container.encode(record.scopes.names, forKey: .scopes)
            try container.encode(record.createdAt, forKey: .createdAt)
            try container.encode(record.lastUsedAt, forKey: .lastUsedAt)
            try container.encode(record.revokedAt, forKey: .revokedAt)
        }
    }

    /// The answer to `POST /api/keys` and `:rotate`: the only time the key is shown.
    struct Created: Encodable {
        var id: String
        var name: String
        var scopes: [String]
        var createdAt: Date
        var key: String

        init(_ record: ServerKeyRecord, key: String) {
            (id, name, scopes, createdAt, self.key) = (
                String(record.id), record.name, record.scopes.names, record.createdAt, key
            )
        }
    }

    struct List: ResponseEncodable {
        var keys: [Shown]
    }

    /// `GET /api/keys`: every key of the project, revoked ones included, by id.
    @Sendable func list(_ request: Request, context: RegistryRequestContext) async throws -> List {
        List(keys: try await registry.serverKeys(in: try context.requireProject()).map(Shown.init))
    }

    /// `POST /api/keys` → 201 with the key.
    @Sendable func create(_ request: Request, context: RegistryRequestContext) async throws -> Response {
        let project = try context.requireProject()
        let body = try await JSONBody.decode(CreateRequest.self, from: request, limit: registry.limits.requestBodyBytes)
        guard let name = body.name, !name.isEmpty else { throw BadRequest.keyNameRequired }
        guard let names = body.scopes else { throw BadRequest.keyScopesRequired }
        guard names.count <= 16 else { throw BadRequest.tooManyKeyScopes }
        let (_, record, key) = try await registry.addServerKey(
            toProject: project.projectId, name: name, scopes: try KeyScopes(names: names),
            by: try context.requireActor(request))
        return try JSONResponse.make(Created(record, key: key), status: .created)
    }

    /// `DELETE /api/keys/{id}` → 204: the key stops working at once, on every server within a second.
    @Sendable func revoke(_ request: Request, context: RegistryRequestContext) async throws -> Response {
        let project = try context.requireProject()
        _ = try await registry.revokeServerKey(
            id: try Self.id(request, context), in: project, by: try context.requireActor(request))
        return Response(status: .noContent)
    }

    /// `POST /api/keys/{id}:rotate` → 201: a new key with the same name and scopes; the old one
    /// works on for `gracePeriod`.
    @Sendable func rotate(_ request: Request, context: RegistryRequestContext) async throws -> Response {
        let project = try context.requireProject()
        let id = try Self.id(request, context)
        let body = try await JSONBody.decode(RotateRequest.self, from: request, limit: registry.limits.requestBodyBytes)
        let grace = try body.gracePeriod.map(Self.gracePeriod) ?? .zero
        let (record, key) = try await registry.rotateServerKey(
            id: id, in: project, gracePeriod: grace, by: try context.requireActor(request))
        return try JSONResponse.make(Created(record, key: key), status: .created)
    }

    /// A key's id: digits; anything else names no key.
    static func id(_ request: Request, _ context: RegistryRequestContext) throws -> Int64 {
        let text = try request.pathValue("id", context: context)
        guard text.utf8.count <= 19, text.utf8.allSatisfy({ (48...57).contains($0) }), let id = Int64(text) else {
            throw RegistryError.serverKeyNotFound
        }
        return id
    }

    /// `"86400s"`, as Google writes durations: at most 7 days.
    static func gracePeriod(_ text: String) throws -> Duration {
        let limit = RegistryService.maximumGracePeriod.components.seconds
        guard text.hasSuffix("s"), text.utf8.count <= 16, let value = Double(text.dropLast()), value.isFinite,
            value >= 0, value <= Double(limit)
        else {
            throw BadRequest.gracePeriodInvalid(maximumSeconds: limit)
        }
        return .milliseconds(Int64((value * 1000).rounded()))
    }
}
