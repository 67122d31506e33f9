import Foundation
import Registry
import _CryptoExtras

/// A project's delivery to devices through FCM HTTP v1 (`project relay`), and its mirror of
/// Google's device groups (`project mirror`): which Firebase project, signed in with which
/// service account's key, through which upstream.
///
/// The store keeps them as the `fcm-v1` channel's `ChannelSettings`: the private key among the
/// secrets, kept in the database (already mode 0600, already holding secrets) and leaving it only
/// to sign assertions: no command, log line or API prints it.
public struct FCMSettings: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible {
    /// The Firebase project messages go to: the key file's `project_id`.
    public var firebaseProjectID: String
    /// The assertions' issuer: the key file's `client_email`.
    public var clientEmail: String
    /// The assertions' `kid`: the key file's `private_key_id`.
    public var privateKeyID: String?
    /// PEM, as the key file holds it.
    public var privateKey: String
    /// Where assertions are exchanged for access tokens: the key file's `token_uri`.
    public var tokenURI: String
    /// The base URL the v1 API is called at: `https://fcm.googleapis.com` unless said otherwise.
    public var upstream: String

    /// The channel's name in the store.
    public static let channel = "fcm-v1"
    public static let googleUpstream = "https://fcm.googleapis.com"
    /// The one scope a relay asks for.
    public static let scope = "https://www.googleapis.com/auth/firebase.messaging"

    public init(
        firebaseProjectID: String, clientEmail: String, privateKeyID: String?, privateKey: String, tokenURI: String,
        upstream: String
    ) {
        self.firebaseProjectID = firebaseProjectID
        self.clientEmail = clientEmail
        self.privateKeyID = privateKeyID
        self.privateKey = privateKey
        self.tokenURI = tokenURI
        self.upstream = upstream
    }

    /// Reads Google's service-account JSON, as the Firebase console downloads it, and checks
    /// everything a relay will need before it is stored: the key parses as RSA, and both URLs are
    /// HTTP(S) URLs with a host.
    public init(serviceAccountJSON: Data, upstream: String = googleUpstream) throws(RelaySetupError) {
        struct KeyFile: Decodable {
            var type: String?
            var project_id: String?
            var private_key_id: String?
            var private_key: String?
            var client_email: String?
            var token_uri: String?
        }
        guard let file = try? JSONDecoder().decode(KeyFile.self, from: serviceAccountJSON) else {
            throw RelaySetupError("the service-account file is not JSON")
        }
        guard file.type == nil || file.type == "service_account" else {
            throw RelaySetupError("the file is a \(file.type ?? "") credential, not a service account's key")
        }
        guard let project = file.project_id, !project.isEmpty, let email = file.client_email, !email.isEmpty,
            let key = file.private_key, let tokenURI = file.token_uri
        else {
            throw RelaySetupError(
                "the service-account file lacks project_id, client_email, private_key or token_uri")
        }
        guard (try? _RSA.Signing.PrivateKey(pemRepresentation: key)) != nil else {
            throw RelaySetupError("the service-account file's private_key is not an RSA key in PEM")
        }
        try Self.checkURL(tokenURI, named: "token_uri")
        try Self.checkURL(upstream, named: "--upstream", baseOnly: true)
        self.init(
            firebaseProjectID: project, clientEmail: email, privateKeyID: file.private_key_id, privateKey: key,
            tokenURI: tokenURI, upstream: upstream.hasSuffix("/") ? String(upstream.dropLast()) : upstream)
    }

    /// `https://…` (or `http://…`, for an emulator or a proxy on the same host) with a host; a
    /// base URL has no path, query or fragment.
    static func checkURL(_ text: String, named name: String, baseOnly: Bool = false) throws(RelaySetupError) {
        guard let url = URLComponents(string: text), let scheme = url.scheme?.lowercased(),
            scheme == "https" || scheme == "http", let host = url.host, !host.isEmpty, url.user == nil
        else { throw RelaySetupError("\(name) must be an http or https URL with a host: \(text)") }
        if baseOnly, !(url.path.isEmpty || url.path == "/") || url.query != nil || url.fragment != nil {
            throw RelaySetupError("\(name) must be a base URL without a path: \(text)")
        }
    }

    /// Everything but the key, which is never printed.
    public var description: String {
        "FCM HTTP v1 to \(firebaseProjectID) at \(upstream) as \(clientEmail) (key \(privateKeyID ?? "without id"), not shown)"
    }

    public var debugDescription: String { description }

    /// The settings as the store keeps them.
    public var stored: ChannelSettings {
        ChannelSettings(
            channel: Self.channel,
            settings: [
                "firebaseProjectId": .string(firebaseProjectID), "clientEmail": .string(clientEmail),
                "privateKeyId": privateKeyID.map(JSONValue.string) ?? .null, "tokenUri": .string(tokenURI),
                "upstream": .string(upstream),
            ],
            secrets: ["privateKey": .string(privateKey)])
    }

    /// The settings a store kept.
    /// - Throws: `ChannelSettingsUnreadable` for another channel's settings, or a field missing.
    public init(_ stored: ChannelSettings) throws(ChannelSettingsUnreadable) {
        guard stored.channel == Self.channel else {
            throw ChannelSettingsUnreadable(
                "the settings are the \(stored.channel) channel's, and this server delivers through \(Self.channel)")
        }
        func field(_ name: String, in fields: [String: JSONValue]) throws(ChannelSettingsUnreadable) -> String {
            guard let value = fields[name]?.string else {
                throw ChannelSettingsUnreadable("the \(Self.channel) settings lack \(name)")
            }
            return value
        }
        self.init(
            firebaseProjectID: try field("firebaseProjectId", in: stored.settings),
            clientEmail: try field("clientEmail", in: stored.settings),
            privateKeyID: stored.settings["privateKeyId"]?.string,
            privateKey: try field("privateKey", in: stored.secrets),
            tokenURI: try field("tokenUri", in: stored.settings), upstream: try field("upstream", in: stored.settings))
    }

    /// The path one message is posted to.
    public var sendPath: String {
        "/v1/projects/\(firebaseProjectID)/messages:send"
    }

    /// The URL one message is posted to.
    public var sendURL: String {
        upstream + sendPath
    }

    /// The JWT-bearer grant's assertion: RS256, signed with the key, `iss` the client email, `aud`
    /// the token URI, the messaging scope, valid for `lifetime` (at most an hour, as Google takes).
    public func assertion(now: Date = Date(), lifetime: TimeInterval = 3600) throws -> String {
        let key = try _RSA.Signing.PrivateKey(pemRepresentation: privateKey)
        var header: [String: String] = ["alg": "RS256", "typ": "JWT"]
        if let privateKeyID { header["kid"] = privateKeyID }
        let issued = Int(now.timeIntervalSince1970)
        let claims: [String: JSONValue] = [
            "iss": .string(clientEmail), "aud": .string(tokenURI), "scope": .string(Self.scope),
            "iat": .number(Double(issued)), "exp": .number(Double(issued + Int(min(lifetime, 3600)))),
        ]
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        let signingInput =
            "\(Base64URL.encode(try encoder.encode(header))).\(Base64URL.encode(try encoder.encode(claims)))"
        let signature = try key.signature(for: Array(signingInput.utf8), padding: .insecurePKCS1v1_5)
        return "\(signingInput).\(Base64URL.encode(signature.rawRepresentation))"
    }
}

/// A service-account file or upstream `project relay` cannot use, said in the user's terms.
public struct RelaySetupError: Error, Sendable, CustomStringConvertible {
    public var description: String

    public init(_ description: String) {
        self.description = description
    }
}
