import FCMWire
import HTTPTypes
import Hummingbird
import Logging
import Registry

/// Finds the project a request's server key opens, or answers 401 in the request's API family.
///
/// Accepts `Authorization: key=<server key>` (FCM's legacy form), `Authorization: Bearer <server key>`
/// and `Authorization: Bearer <access token>` (from `POST /token`, for a service account)
/// (with or without `access_token_auth: true`). A `project_id` header, which FCM's device-group API
/// requires, must name the same project as the key.
struct AuthMiddleware: RouterMiddleware {
    typealias Context = RegistryRequestContext

    let registry: RegistryService

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response)
        async throws -> Response
    {
        context.labels.route = context.endpointPath
        let family = APIFamily(path: request.uri.path)
        guard let key = Self.serverKey(in: request.headers[.authorization]) else {
            throw Self.unauthenticated(family, ServerWording.noServerKey)
        }
        let grant =
            key.hasPrefix(RegistryService.accessTokenPrefix)
            ? try await registry.grant(authenticatedByAccessToken: key)
            : try await registry.grant(authenticatedBy: key)
        guard let grant else {
            throw Self.unauthenticated(family, ServerWording.credentialsNotValid)
        }
        let project = grant.project
        if let named = request.headers[Self.projectIDHeader], !project.isNamed(named) {
            // Say what the call carried: an app's server key, or a service account's access token
            // (as the device-group mirror sends, with project_id, to another fcm-registry playing Google).
            let carried = key.hasPrefix(RegistryService.accessTokenPrefix) ? "access token" : "server key"
            throw ErrorEnvelope.forbidden(
                family,
                ServerWording.projectHeaderMismatch(
                    carried: carried, projectID: project.projectId, senderID: project.senderId))
        }
        var context = context
        context.project = project
        context.grant = grant
        context.logger[metadataKey: "project.id"] = .string(project.projectId)
        context.labels.project = project.projectId
        return try await next(request, context)
    }

    static let projectIDHeader = HTTPField.Name("project_id")!

    /// The key in `key=<key>` or `Bearer <key>`.
    static func serverKey(in header: String?) -> String? {
        guard let header else { return nil }
        // Byte-level work: this runs on every request.
        var bytes = Substring(header).utf8[...]
        // Auth schemes are case-insensitive (RFC 9110 §11.1): compare with ASCII letters folded.
        guard
            let scheme = schemes.first(where: { scheme in
                bytes.count >= scheme.count && zip(bytes, scheme).allSatisfy { $0 | 0x20 == $1 | 0x20 }
            })
        else { return nil }
        bytes = bytes.dropFirst(scheme.count)
        while bytes.first == UInt8(ascii: " ") { bytes = bytes.dropFirst() }
        while bytes.last == UInt8(ascii: " ") { bytes = bytes.dropLast() }
        return bytes.isEmpty ? nil : String(Substring(bytes))
    }

    private static let schemes = ["key=", "bearer "].map { Array($0.utf8) }

    static func unauthenticated(_ family: APIFamily, _ message: String) -> APIError {
        var error: APIError
        switch family {
        case .legacy, .instanceID:
            error = .plain(.unauthorized, "Unauthorized: \(message)")
        case .v1:
            error = .google(
                .unauthorized, "UNAUTHENTICATED", "Request had invalid authentication credentials: \(message)")
        case .native:
            error = .native(.unauthorized, "unauthenticated", message)
        }
        error.headers[.wwwAuthenticate] = "Bearer"
        return error
    }
}
