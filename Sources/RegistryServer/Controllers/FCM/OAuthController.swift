import FCMWire
import Foundation
import Hummingbird
import Registry

/// Google's OAuth 2.0 token endpoint for service accounts (`POST /token`, the `token_uri` of a
/// credentials file and `oauth2.googleapis.com`'s path), and the IAM Credentials call that
/// google-auth makes in the background with the access token.
struct OAuthController {
    let registry: RegistryService

    /// Routes that need no server key: the token endpoint is how a client gets one.
    func addOpenRoutes(to routes: RouteRecorder) {
        routes.on("/token", .post, use: token)
    }

    func addRoutes(to routes: RouteRecorder) {
        routes.on("/v1/projects/:project/serviceAccounts/:account/allowedLocations", .get, use: allowedLocations)
    }

    struct TokenResponse: Encodable {
        var access_token: String
        var expires_in: Int
        var token_type = "Bearer"
    }

    /// `grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer&assertion=<JWT>`, form-encoded (as
    /// google-auth sends it) or as JSON. Errors are `{"error":…,"error_description":…}`, 400.
    @Sendable func token(_ request: Request, context: RegistryRequestContext) async throws -> Response {
        var request = request
        let buffer = try await request.collectBody(upTo: registry.limits.requestBodyBytes)
        let fields: [String: String]
        if request.headers[.contentType]?.lowercased().hasPrefix("application/json") == true {
            fields = (try JSONBody.object(buffer)).compactMapValues(\.string)
        } else {
            fields = Self.form(String(decoding: buffer.readableBytesView, as: UTF8.self))
        }
        do {
            guard let grant = fields["grant_type"] else { throw OAuthError.invalidRequest("Missing grant_type.") }
            guard grant == "urn:ietf:params:oauth:grant-type:jwt-bearer" else {
                throw OAuthError.unsupportedGrantType("Invalid grant_type: \(grant)")
            }
            guard let assertion = fields["assertion"] else { throw OAuthError.invalidRequest("Missing assertion.") }
            let issued = try await registry.exchange(assertion: assertion)
            var response = try JSONResponse.make(TokenResponse(access_token: issued.token, expires_in: issued.expiresIn))
            response.headers[.cacheControl] = "no-store"
            return response
        } catch let error as OAuthError {
            return try JSONResponse.make(
                ["error": error.code, "error_description": error.description], status: .badRequest)
        }
    }

    /// google-auth asks which regions a service account may be used in; the answer is "no
    /// restriction", so a client mapped to this server never sends our tokens to Google.
    @Sendable func allowedLocations(_ request: Request, context: RegistryRequestContext) async throws -> Response {
        _ = try context.requireProject()
        return try JSONResponse.any(["encodedLocations": "0x0", "locations": [String]()])
    }

    /// `a=1&b=2`, percent- and plus-decoded.
    static func form(_ text: String) -> [String: String] {
        var fields: [String: String] = [:]
        for pair in text.split(separator: "&") {
            let parts = pair.split(separator: "=", maxSplits: 1, omittingEmptySubsequences: false)
            func decode(_ part: Substring) -> String {
                let spaced = part.replacingOccurrences(of: "+", with: " ")
                return spaced.removingPercentEncoding ?? spaced
            }
            fields[decode(parts[0])] = parts.count > 1 ? decode(parts[1]) : ""
        }
        return fields
    }
}
