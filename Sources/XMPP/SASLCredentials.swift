import Foundation

/// The credentials of a SASL `PLAIN` exchange (RFC 4616), which CCS clients also send under the
/// names `X-OAUTH2` and `X-GOOGLE-TOKEN`: base64 of `[authzid] NUL authcid NUL secret`.
public struct SASLCredentials: Sendable, Equatable {
    public var authorizationIdentity: String
    public var authenticationIdentity: String
    /// A server key or an OAuth2 access token.
    public var secret: String

    /// The mechanisms offered, in CCS's order. Never a challenge-response one: clients pick the
    /// strongest offered, and a server key cannot be checked through SCRAM or DIGEST-MD5.
    public static let mechanisms = ["X-OAUTH2", "X-GOOGLE-TOKEN", "PLAIN"]

    /// The domains clients put after the sender id.
    public static let senderDomains: Set<Substring> = ["gcm.googleapis.com", "fcm.googleapis.com", "projects.gcm.android.com"]

    /// Decodes the text of an `<auth>` element; `nil` when it is not base64 of the PLAIN form.
    public init?(base64 text: String) {
        let trimmed = text.filter { !$0.isWhitespace }
        guard trimmed.utf8.count <= 8192, let data = Data(base64Encoded: trimmed) else { return nil }
        let parts = data.split(separator: 0, maxSplits: 2, omittingEmptySubsequences: false)
        guard parts.count == 3 else { return nil }
        guard let authzid = String(data: parts[0], encoding: .utf8), let authcid = String(data: parts[1], encoding: .utf8),
            let secret = String(data: parts[2], encoding: .utf8)
        else { return nil }
        authorizationIdentity = authzid
        authenticationIdentity = authcid
        self.secret = secret
    }

    public init(authorizationIdentity: String = "", authenticationIdentity: String, secret: String) {
        self.authorizationIdentity = authorizationIdentity
        self.authenticationIdentity = authenticationIdentity
        self.secret = secret
    }

    /// The sender id the client logs in as, however it spelled it: from the authcid (the part
    /// before any `@`), else from the authzid; when both hold one they must agree. `nil` when
    /// neither names a numeric sender id with an accepted domain or none.
    public var senderID: String? {
        let fromAuthcid = Self.senderID(in: authenticationIdentity)
        let fromAuthzid = Self.senderID(in: authorizationIdentity)
        if let fromAuthcid, let fromAuthzid, fromAuthcid != fromAuthzid { return nil }
        return fromAuthcid ?? fromAuthzid
    }

    private static func senderID(in identity: String) -> String? {
        let parts = identity.split(separator: "@", maxSplits: 1, omittingEmptySubsequences: false)
        guard let user = parts.first, !user.isEmpty, user.count <= 20, user.allSatisfy({ $0.isASCII && $0.isNumber })
        else { return nil }
        if parts.count == 2 {
            // A full JID may carry a resource: 123@gcm.googleapis.com/app.
            let domain = parts[1].split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)[0]
            guard senderDomains.contains(Substring(domain.lowercased())) else { return nil }
        }
        return String(user)
    }
}
