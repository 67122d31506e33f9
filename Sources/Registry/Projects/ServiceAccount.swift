import Foundation

/// A Google-style service account of a project: what `project service-account` creates so that
/// the Firebase Admin SDKs sign in with their standard credentials file. Only the public key is
/// kept; the private key is shown once, inside the credentials file.
public struct ServiceAccount: Sendable, Hashable, Codable {
    /// `private_key_id`: the `kid` of the JWTs signed with this account's key.
    public var keyID: String
    /// `client_email`: the JWTs' issuer.
    public var clientEmail: String
    public var clientID: String
    /// The public key, PEM (SubjectPublicKeyInfo).
    public var publicKey: String
    /// The `token_uri` its file names: besides Google's, the one audience its assertions may
    /// have. `nil` for an account made before token URIs were kept, whose assertions may name
    /// any URL ending in `/token`, as every account's could then.
    public var tokenURI: String?
    public var createdAt: Date
    public var revokedAt: Date?
    /// What its access tokens may do; `nil` for what FCM lets a service account do
    /// (`KeyScopes.serviceAccountDefault`).
    public var scopes: KeyScopes?

    public init(
        keyID: String, clientEmail: String, clientID: String, publicKey: String, tokenURI: String?, createdAt: Date,
        revokedAt: Date? = nil, scopes: KeyScopes? = nil
    ) {
        self.scopes = scopes
        self.keyID = keyID
        self.clientEmail = clientEmail
        self.clientID = clientID
        self.publicKey = publicKey
        self.tokenURI = tokenURI
        self.createdAt = createdAt
        self.revokedAt = revokedAt
    }
}

extension ServiceAccount {
    /// Whether an assertion may name `audience` besides Google's token URL.
    func accepts(audience: String) -> Bool {
        tokenURI.map { audience == $0 } ?? audience.hasSuffix("/token")
    }
}

/// The credentials file the SDKs load (`GOOGLE_APPLICATION_CREDENTIALS`, `credentials.Certificate`),
/// field for field as Google writes it.
public struct ServiceAccountFile: Sendable, Codable {
    public var type = "service_account"
    /// The registry's project id: every SDK builds `/v1/projects/{p}` paths from it.
    public var project_id: String
    public var private_key_id: String
    public var private_key: String
    public var client_email: String
    public var client_id: String
    public var auth_uri = "https://accounts.google.com/o/oauth2/auth"
    public var token_uri: String
    public var auth_provider_x509_cert_url = "https://www.googleapis.com/oauth2/v1/certs"
    public var client_x509_cert_url: String
    /// Only `googleapis.com`: google-auth skips the token exchange for any other universe.
    public var universe_domain = "googleapis.com"
}
