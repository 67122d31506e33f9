import Crypto
import _CryptoExtras
import Foundation

/// Why a token request was refused, in the words of Google's token endpoint (RFC 6749 §5.2).
public enum OAuthError: Error, Sendable, Hashable {
    case invalidRequest(String)
    case unsupportedGrantType(String)
    case invalidGrant(String)
    case invalidScope(String)

    public var code: String {
        switch self {
        case .invalidRequest: "invalid_request"
        case .unsupportedGrantType: "unsupported_grant_type"
        case .invalidGrant: "invalid_grant"
        case .invalidScope: "invalid_scope"
        }
    }

    public var description: String {
        switch self {
        case .invalidRequest(let text), .unsupportedGrantType(let text), .invalidGrant(let text),
            .invalidScope(let text):
            text
        }
    }
}

/// An access token handed out for a service account's signed assertion.
public struct AccessToken: Sendable {
    public var token: String
    /// Seconds until it expires.
    public var expiresIn: Int
}

/// OAuth 2.0 as Google's token endpoint does it for service accounts: a JWT signed with the
/// account's key (RS256) is exchanged for an access token, which then opens the account's
/// project wherever a server key does.
extension RegistryService {
    /// Google's token URL: an audience every assertion may name, since some clients sign for it
    /// whatever their credentials file says; the file's own `token_uri` is the only other.
    public static let googleTokenURL = "https://oauth2.googleapis.com/token"
    static let scopes: Set = [
        "https://www.googleapis.com/auth/firebase.messaging", "https://www.googleapis.com/auth/cloud-platform",
    ]
    /// Clocks differ: an assertion issued up to this far in the future, or expired this long
    /// ago, is still taken.
    static let clockSkew: TimeInterval = 300
    /// What every access token starts with; anything else after `Bearer` is a server key.
    public static let accessTokenPrefix = AccessTokenCodec.prefix
    /// Access tokens live an hour, as Google's do (`expires_in` 3599).
    static let accessTokenLifetime: TimeInterval = 3600
    /// How long after its first exchange an assertion is answered again, with the same token.
    /// google-auth signs with a deterministic key and a whole-second `iat`, so a client whose
    /// credentials refresh twice in one second (firebase-admin's messaging and topic clients
    /// at start, say) sends the very same JWT twice; later, the same JWT is a replay.
    public static let repeatedAssertionWindow: TimeInterval = 10

    // MARK: - Service accounts

    /// Creates a service account for the project: a new RSA key pair whose public half is stored.
    /// - Returns: the credentials file, holding the private key (shown only now).
    /// - Parameter scopes: what its access tokens may do; `nil` for what FCM lets a service
    ///   account do (`KeyScopes.serviceAccountDefault`).
    public func createServiceAccount(
        forProject projectId: String, tokenURI: String = googleTokenURL, scopes: KeyScopes? = nil
    ) async throws -> (Project, ServiceAccountFile) {
        if let scopes { try Self.checkKey(name: "", scopes: scopes) }
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048)
        let keyID = (0..<20).map { _ in String(format: "%02x", UInt8.random(in: 0...255)) }.joined()
        let clientID = "1" + (0..<20).map { _ in String(Int.random(in: 0...9)) }.joined()
        guard let project = try await store.projects().first(where: { $0.isNamed(projectId) }) else {
            throw RegistryError.projectNotFound(projectId)
        }
        let email = "fcm-registry-\(keyID.prefix(6))@\(project.projectId).iam.gserviceaccount.com"
        let account = ServiceAccount(
            keyID: keyID, clientEmail: email, clientID: clientID, publicKey: key.publicKey.pemRepresentation,
            tokenURI: tokenURI, createdAt: Date(), scopes: scopes)
        try await store.addServiceAccount(account, to: project)
        let file = ServiceAccountFile(
            project_id: project.projectId, private_key_id: keyID, private_key: key.pkcs8PEMRepresentation + "\n",
            client_email: email, client_id: clientID, token_uri: tokenURI,
            client_x509_cert_url:
                "https://www.googleapis.com/robot/v1/metadata/x509/\(email.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? email)"
        )
        return (project, file)
    }

    public func serviceAccounts(in project: Project) async throws -> [ServiceAccount] {
        try await store.serviceAccounts(in: project)
    }

    /// Revokes a service account by its key id: its assertions are refused from now on (access
    /// tokens already issued run out within the hour).
    public func revokeServiceAccount(keyID: String) async throws {
        try await store.revokeServiceAccount(keyID: keyID)
    }

    // MARK: - The token exchange

    /// Exchanges a service account's signed JWT (`grant_type=urn:ietf:params:oauth:grant-type:jwt-bearer`)
    /// for an access token. Checks the signature against the account's stored key (by `kid`),
    /// the issuer, the audience (Google's token URL or the account's own `token_uri`), `iat`/`exp`
    /// (at most an hour apart, with some clock skew) and the scope, and that the assertion was
    /// not exchanged before, but in the last ``repeatedAssertionWindow`` (then the answer is the
    /// token already issued for it): one read off the wire, or out of a log, opens nothing.
    public func exchange(assertion: String, now: Date = Date()) async throws -> AccessToken {
        let parts = assertion.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 3, let headerBytes = Base64URL.decode(String(parts[0])),
            let claimBytes = Base64URL.decode(String(parts[1])), let signature = Base64URL.decode(String(parts[2]))
        else { throw OAuthError.invalidGrant("Invalid JWT: the assertion is not a signed JWT.") }
        struct Header: Decodable {
            var alg: String
            var kid: String?
        }
        struct Claims: Decodable {
            var iss: String?
            var scope: String?
            var aud: String?
            var iat: Double?
            var exp: Double?
        }
        guard let header = try? JSONDecoder().decode(Header.self, from: Data(headerBytes)),
            let claims = try? JSONDecoder().decode(Claims.self, from: Data(claimBytes))
        else { throw OAuthError.invalidGrant("Invalid JWT: the header or claims are not JSON.") }
        guard header.alg == "RS256" else { throw OAuthError.invalidGrant("Invalid JWT: the algorithm must be RS256.") }
        // google-auth (Python, Go, Java) names the key in `kid`; Node's google-auth-library signs
        // without one, so the issuer (the account's email) finds the key instead.
        let found: (ServiceAccount, Project)?
        if let kid = header.kid {
            found = try await store.serviceAccount(keyID: kid)
        } else if let issuer = claims.iss {
            found = try await store.serviceAccount(clientEmail: issuer)
        } else {
            found = nil
        }
        guard let (account, project) = found else { throw OAuthError.invalidGrant("Invalid JWT Signature.") }
        let publicKey = try _RSA.Signing.PublicKey(pemRepresentation: account.publicKey)
        let signingInput = Array("\(parts[0]).\(parts[1])".utf8)
        guard
            publicKey.isValidSignature(
                _RSA.Signing.RSASignature(rawRepresentation: signature), for: signingInput,
                padding: .insecurePKCS1v1_5)
        else { throw OAuthError.invalidGrant("Invalid JWT Signature.") }
        guard claims.iss == account.clientEmail else {
            throw OAuthError.invalidGrant("Invalid JWT: the issuer is not the key's service account.")
        }
        guard let audience = claims.aud, audience == Self.googleTokenURL || account.accepts(audience: audience) else {
            throw OAuthError.invalidGrant("Invalid JWT: the audience must be \(account.tokenURI ?? Self.googleTokenURL).")
        }
        guard let issued = claims.iat, let expires = claims.exp else {
            throw OAuthError.invalidGrant("Invalid JWT: iat and exp are required.")
        }
        let time = now.timeIntervalSince1970
        guard expires > issued, expires - issued <= Self.accessTokenLifetime else {
            throw OAuthError.invalidGrant("Invalid JWT: exp must be after iat, and at most an hour after it.")
        }
        guard issued <= time + Self.clockSkew, expires >= time - Self.clockSkew else {
            throw OAuthError.invalidGrant(
                "Invalid JWT: Token must be a short-lived token (60 minutes) and in a reasonable timeframe. Check your iat and exp values in the JWT claim."
            )
        }
        let requested = Set((claims.scope ?? "").split(separator: " ").map(String.init))
        guard !requested.isDisjoint(with: Self.scopes) else {
            throw OAuthError.invalidScope(
                "The scope must include https://www.googleapis.com/auth/firebase.messaging or https://www.googleapis.com/auth/cloud-platform."
            )
        }
        // Kept until it could no longer be taken anyway: its expiry, plus the clock skew allowed.
        let hash = Array(SHA256.hash(data: Array(assertion.utf8)))
        let firstUse = try await store.markAssertionUsed(
            hash: hash, expiresAt: Date(timeIntervalSince1970: expires + Self.clockSkew), now: now)
        guard now.timeIntervalSince(firstUse) <= Self.repeatedAssertionWindow else {
            throw OAuthError.invalidGrant("Invalid JWT: the assertion has been used before.")
        }
        // Derived from the assertion and its first use alone, so a repeat gets the same token.
        return accessTokens.issue(
            for: project, scopes: account.scopes ?? .serviceAccountDefault,
            expiresAt: firstUse.addingTimeInterval(Self.accessTokenLifetime),
            nonce: Array(hash.prefix(8)), now: now)
    }

    /// The project an access token opens, or `nil` for a token that is malformed, forged,
    /// expired, or of a project that no longer exists.
    public func project(authenticatedByAccessToken token: String, now: Date = Date()) async throws -> Project? {
        try await grant(authenticatedByAccessToken: token, now: now)?.project
    }

    /// What an access token may do: its project, with what FCM lets a service account do
    /// (`KeyScopes.serviceAccountDefault`); `nil` as for ``project(authenticatedByAccessToken:now:)``.
    public func grant(authenticatedByAccessToken token: String, now: Date = Date()) async throws -> KeyGrant? {
        guard let (rowID, scopes) = accessTokens.projectRowID(of: token, now: now) else { return nil }
        // The signature and expiry are checked on every request above; which project the row id
        // names is remembered like a server key's, so a request does not read the database for it.
        let hash = ServerKey.hash(token)
        if let cached = serverKeys.lookUp(hash, now: now) { return cached }
        let grant = try await store.projects().first { $0.rowID == rowID }.map {
            KeyGrant(project: $0, keyID: nil, scopes: scopes)
        }
        serverKeys.store(grant, for: hash)
        return grant
    }
}

/// Opaque, stateless access tokens: `ya29.` + the project and expiry, authenticated with an HMAC
/// under a secret of the database. Nothing is stored per token, so any server process on the
/// database accepts a token any other issued.
struct AccessTokenCodec: Sendable {
    static let prefix = "ya29.fcmr."
    /// The HMAC key's bytes (a database secret).
    let secret: [UInt8]
    var key: SymmetricKey { SymmetricKey(data: secret) }

    /// - Parameters:
    ///   - scopes: what the token may do, carried in it (one byte after the nonce).
    ///   - nonce: 8 bytes that tell tokens of one project and expiry apart.
    func issue(
        for project: Project, scopes: KeyScopes = .serviceAccountDefault, expiresAt: Date, nonce: [UInt8],
        now: Date = Date()
    ) -> AccessToken {
        var payload: [UInt8] = []
        withUnsafeBytes(of: UInt64(bitPattern: project.rowID).littleEndian) { payload += $0 }
        withUnsafeBytes(of: UInt64(expiresAt.timeIntervalSince1970).littleEndian) { payload += $0 }
        payload += nonce
        payload.append(UInt8(truncatingIfNeeded: scopes.rawValue))
        let mac = Array(HMAC<SHA256>.authenticationCode(for: payload, using: key))
        let token = Self.prefix + Base64URL.encode(payload) + "." + Base64URL.encode(mac)
        // Google answers 3599 for its hour: the second in flight is already spent.
        return AccessToken(token: token, expiresIn: Int(expiresAt.timeIntervalSince(now).rounded()) - 1)
    }

    /// The project row id and scopes a valid, unexpired token carries. A token issued before
    /// tokens carried scopes (24 bytes) has what FCM lets a service account do.
    func projectRowID(of token: String, now: Date) -> (Int64, KeyScopes)? {
        guard token.hasPrefix(Self.prefix) else { return nil }
        let parts = token.dropFirst(Self.prefix.count).split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 2, let payload = Base64URL.decode(String(parts[0])), payload.count == 24 || payload.count == 25,
            let mac = Base64URL.decode(String(parts[1])),
            HMAC<SHA256>.isValidAuthenticationCode(mac, authenticating: payload, using: key)
        else { return nil }
        let rowID = payload[0..<8].reversed().reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        let expiry = payload[8..<16].reversed().reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        guard Double(expiry) > now.timeIntervalSince1970 else { return nil }
        let scopes = payload.count == 25 ? KeyScopes(rawValue: Int(payload[24])) : .serviceAccountDefault
        guard scopes.isValid else { return nil }
        return (Int64(bitPattern: rowID), scopes)
    }
}
