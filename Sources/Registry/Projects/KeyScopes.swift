import Foundation

/// One thing a server key may do. The HTTP server's route table (`RouteScopes`) names the one
/// each route needs; `docs/http-api.md` prints that table.
public enum KeyScope: String, Sendable, CaseIterable, Codable, Comparable {
    /// Every send route, `validate_only`, `messages:validate`, scheduling and cancelling.
    case send
    /// Token registration and attributes, topic subscriptions, device group create/add/remove.
    case subscribe
    /// Every `GET`, `audiences:resolve`, `conditions:check`.
    case read
    /// Keys, webhooks, settings, faults, unregistering and deleting; implies the other three.
    case admin

    public static func < (lhs: KeyScope, rhs: KeyScope) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}

/// The scopes a key was given: at least one. Kept as a bit set, the integer the stores keep in
/// `serverKey.scopes` (send 1, subscribe 2, read 4, admin 8), so a store can tell an `admin` key
/// with `scopes & 8` without knowing the rules.
public struct KeyScopes: OptionSet, Sendable, Hashable, Codable {
    public let rawValue: Int

    public init(rawValue: Int) { self.rawValue = rawValue }

    public init(_ scope: KeyScope) {
        switch scope {
        case .send: self = .send
        case .subscribe: self = .subscribe
        case .read: self = .read
        case .admin: self = .admin
        }
    }

    public static let send = KeyScopes(rawValue: 1)
    public static let subscribe = KeyScopes(rawValue: 2)
    public static let read = KeyScopes(rawValue: 4)
    public static let admin = KeyScopes(rawValue: 8)
    /// What the keys made before scopes existed have, and what a key made without `--scope` has.
    public static let all: KeyScopes = [.send, .subscribe, .read, .admin]
    /// What a service account's access tokens may do unless the account was given scopes: what
    /// FCM lets a service account do (send, manage topics and groups, and read them), not the
    /// registry's administration.
    public static let serviceAccountDefault: KeyScopes = [.send, .subscribe, .read]

    /// The scopes named, each once; the one rule for API and command line alike.
    /// - Throws: `RegistryError.invalidServerKey` for none, or a name that is not a scope.
    public init(names: [String]) throws(RegistryError) {
        guard !names.isEmpty else {
            throw .invalidServerKey("a key needs at least one scope: send, subscribe, read or admin", field: "scopes")
        }
        var scopes = KeyScopes()
        for name in names {
            guard name.utf8.count <= 16, let scope = KeyScope(rawValue: name) else {
                throw .invalidServerKey(
                    "scopes are send, subscribe, read and admin, not \(name.prefix(16))", field: "scopes")
            }
            scopes.insert(KeyScopes(scope))
        }
        self = scopes
    }

    /// Whether a key with these scopes may do what `scope` allows: `admin` implies every other.
    public func allows(_ scope: KeyScope) -> Bool {
        contains(.admin) || contains(KeyScopes(scope))
    }

    /// The scopes given, in the order send, subscribe, read, admin (never implied ones).
    public var names: [String] {
        KeyScope.allCases.filter { contains(KeyScopes($0)) }.map(\.rawValue)
    }

    /// Whether this is a set of known scopes with at least one (a stored value may be anything).
    public var isValid: Bool { !isEmpty && KeyScopes.all.isSuperset(of: self) }
}

/// A server key as it is listed: never the key itself, which only its creation shows.
public struct ServerKeyRecord: Sendable, Hashable {
    /// The row id: what `DELETE /api/keys/{id}` names.
    public var id: Int64
    public var name: String
    public var scopes: KeyScopes
    public var createdAt: Date
    /// To the minute: uses are written at most once a minute per key and server.
    public var lastUsedAt: Date?
    /// When it stopped (or, during a rotation's grace period, will stop) working.
    public var revokedAt: Date?

    public init(
        id: Int64, name: String, scopes: KeyScopes, createdAt: Date, lastUsedAt: Date? = nil, revokedAt: Date? = nil
    ) {
        (self.id, self.name, self.scopes, self.createdAt) = (id, name, scopes, createdAt)
        (self.lastUsedAt, self.revokedAt) = (lastUsedAt, revokedAt)
    }
}

/// What an authenticated request may do: the project, and the key's id and scopes (`nil` id for
/// a service account's access token).
public struct KeyGrant: Sendable, Hashable {
    public var project: Project
    public var keyID: Int64?
    /// The key's name (empty for an unnamed key and for an access token): what the audit log names.
    public var keyName: String
    public var scopes: KeyScopes
    /// The end of a rotated key's grace period.
    public var expiresAt: Date?

    public init(project: Project, keyID: Int64?, keyName: String = "", scopes: KeyScopes, expiresAt: Date? = nil) {
        (self.project, self.keyID, self.keyName, self.scopes, self.expiresAt) = (
            project, keyID, keyName, scopes, expiresAt
        )
    }

    /// Who the audit log names for a change made with this grant, through `client`
    /// (`X-Registry-Client`, see `AuditActor.client(from:)`).
    public func actor(client: String?) -> AuditActor {
        AuditActor(
            keyID: keyID, keyName: keyID == nil ? "access token" : keyName, client: AuditActor.client(from: client))
    }
}

/// Which key a revocation names.
public enum ServerKeyMatch: Sendable, Hashable {
    /// The key itself, hashed (`project revoke-key`).
    case hash([UInt8])
    /// The key's id in a project (`DELETE /api/keys/{id}`).
    case id(Int64, projectRowID: Int64)
}

/// A key to add: its hash, name and scopes (a bit set, see `KeyScopes`).
public struct NewServerKey: Sendable, Hashable {
    public var hash: [UInt8]
    public var name: String
    public var scopes: Int

    public init(hash: [UInt8], name: String, scopes: Int) {
        (self.hash, self.name, self.scopes) = (hash, name, scopes)
    }
}
