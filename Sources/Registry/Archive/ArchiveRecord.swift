import Foundation

/// One line of an export file (`fcm-registry export`, JSON Lines): what `import` reads back.
///
/// The file is a header, then every project's record and topics, then every token (each with its
/// subscriptions) in the order the registry lists them, then every project's groups (each with
/// its members and the keys that name it): a project comes before anything of it. Every record
/// carries its times, so a registry imported into an empty database answers every API call as the
/// one exported did. The message log is not part of it: it is a log, not the registry.
public enum ArchiveRecord: Sendable, Hashable {
    case header(ArchiveHeader)
    case project(ProjectArchive)
    case topic(TopicArchive)
    case token(TokenArchive)
    case group(GroupArchive)

    /// The project a record belongs to; `nil` for the header.
    public var projectId: String? {
        switch self {
        case .header: nil
        case .project(let record): record.projectId
        case .topic(let record): record.project
        case .token(let record): record.project
        case .group(let record): record.project
        }
    }
}

/// The first line: which format and version follow.
public struct ArchiveHeader: Sendable, Hashable, Codable {
    public static let format = "fcm-registry-export"
    /// The version this build writes and the newest it reads.
    public static let currentVersion = 1

    public var format: String
    public var version: Int
    public var exportedAt: Date
    /// The `fcm-registry --version` that wrote it, for people reading the file.
    public var producer: String?

    public init(exportedAt: Date, producer: String?) {
        format = Self.format
        version = Self.currentVersion
        self.exportedAt = exportedAt
        self.producer = producer
    }
}

/// A project with what lets its clients keep working after an import: the hashes of its server
/// keys (never the keys), its service accounts' public keys, and the keyrings that seal its
/// notification keys.
public struct ProjectArchive: Sendable, Hashable, Codable {
    public var projectId: String
    public var senderId: String
    public var createdAt: Date
    public var serverKeys: [ServerKeyArchive]
    public var serviceAccounts: [ServiceAccountArchive]
    public var keyrings: [KeyringArchive]

    public init(
        projectId: String, senderId: String, createdAt: Date, serverKeys: [ServerKeyArchive],
        serviceAccounts: [ServiceAccountArchive], keyrings: [KeyringArchive]
    ) {
        self.projectId = projectId
        self.senderId = senderId
        self.createdAt = createdAt
        self.serverKeys = serverKeys
        self.serviceAccounts = serviceAccounts
        self.keyrings = keyrings
    }
}

/// A server key as the database keeps it: its SHA-256, URL-safe base64.
public struct ServerKeyArchive: Sendable, Hashable, Codable {
    public var sha256: String
    public var createdAt: Date
    public var revokedAt: Date?
    /// Absent in files written before keys had names: unnamed.
    public var name: String?
    /// Absent in files written before keys had scopes: every scope.
    public var scopes: [String]?

    public init(sha256: String, createdAt: Date, revokedAt: Date?, name: String? = nil, scopes: [String]? = nil) {
        self.sha256 = sha256
        self.createdAt = createdAt
        self.revokedAt = revokedAt
        self.name = name
        self.scopes = scopes
    }
}

/// A service account: its public key and the names its credentials file gives.
public struct ServiceAccountArchive: Sendable, Hashable, Codable {
    public var keyId: String
    public var clientEmail: String
    public var clientId: String
    public var publicKey: String
    public var tokenUri: String?
    public var createdAt: Date
    public var revokedAt: Date?
    /// Absent for an account with FCM's meaning, and in files written before accounts had scopes.
    public var scopes: [String]?

    public init(_ account: ServiceAccount) {
        keyId = account.keyID
        clientEmail = account.clientEmail
        clientId = account.clientID
        publicKey = account.publicKey
        tokenUri = account.tokenURI
        createdAt = account.createdAt
        revokedAt = account.revokedAt
        scopes = account.scopes?.names
    }

    public var account: ServiceAccount {
        ServiceAccount(
            keyID: keyId, clientEmail: clientEmail, clientID: clientId, publicKey: publicKey, tokenURI: tokenUri,
            createdAt: createdAt, revokedAt: revokedAt, scopes: scopes.flatMap { try? KeyScopes(names: $0) })
    }

    /// The scopes as the stores keep them (`nil`: FCM's meaning).
    /// - Throws: `ArchiveProblem` for a name that is not a scope.
    public func scopeBits() throws -> Int? {
        guard let scopes else { return nil }
        do { return try KeyScopes(names: scopes).rawValue } catch {
            throw ArchiveProblem("a service account's scopes are not send, subscribe, read or admin")
        }
    }
}

/// The secret that sealed a project's notification keys, and the project row id they were sealed
/// for: with it, keys issued by the exporting database keep opening after an import.
public struct KeyringArchive: Sendable, Hashable, Codable {
    /// ``NotificationKeyring/fingerprint(secret:sealedFor:)``: how groups refer to it.
    public var id: String
    /// URL-safe base64 of the 32-byte secret.
    public var secret: String
    public var sealedFor: Int64

    public init(_ keyring: NotificationKeyring) {
        id = keyring.fingerprint
        secret = Base64URL.encode(keyring.secret)
        sealedFor = keyring.sealedFor
    }
}

public struct TopicArchive: Sendable, Hashable, Codable {
    public var project: String
    public var name: String
    public var createdAt: Date

    public init(project: String, name: String, createdAt: Date) {
        self.project = project
        self.name = name
        self.createdAt = createdAt
    }
}

/// A token, its state, and the topics it is subscribed to (an unregistered token has none).
public struct TokenArchive: Sendable, Hashable, Codable {
    public var project: String
    public var token: String
    public var state: TokenState
    public var createdAt: Date
    public var updatedAt: Date
    public var topics: [Joined]
    /// When the app last checked in; left out by files from before attributes were kept.
    public var lastSeenAt: Date?
    /// What the token says of its device (`TokenAttributes`), each left out when unknown.
    public var platform: TokenAttributes.Platform?
    public var locale: String?
    public var timeZone: String?
    public var appVersion: String?

    public init(
        project: String, token: String, state: TokenState, createdAt: Date, updatedAt: Date, topics: [Joined],
        lastSeenAt: Date? = nil, attributes: TokenAttributes = TokenAttributes()
    ) {
        self.project = project
        self.token = token
        self.state = state
        self.createdAt = createdAt
        self.updatedAt = updatedAt
        self.topics = topics
        self.lastSeenAt = lastSeenAt
        platform = attributes.platform
        locale = attributes.locale
        timeZone = attributes.timeZone
        appVersion = attributes.appVersion
    }

    public var attributes: TokenAttributes {
        TokenAttributes(platform: platform, locale: locale, timeZone: timeZone, appVersion: appVersion)
    }
}

/// A group, its members, and every key that names it besides the ones this database issues.
public struct GroupArchive: Sendable, Hashable, Codable {
    public var project: String
    public var name: String
    public var createdAt: Date
    public var members: [Member]
    /// The group's id under each keyring of its project: a key sealed by that keyring for that id
    /// opens this group.
    public var keyringIds: [KeyringID]
    /// Keys issued elsewhere, kept as they are: Google's, from `import-groups`.
    public var notificationKeys: [String]
    /// False for a group first met through a mirrored add or remove (`GroupSummary.complete`);
    /// written only then, so files of earlier versions read as complete. Merged into a group
    /// already here, false wins: what was missing is still missing.
    public var complete: Bool

    public init(
        project: String, name: String, createdAt: Date, members: [Member], keyringIds: [KeyringID],
        notificationKeys: [String], complete: Bool = true
    ) {
        self.project = project
        self.name = name
        self.createdAt = createdAt
        self.members = members
        self.keyringIds = keyringIds
        self.notificationKeys = notificationKeys
        self.complete = complete
    }

    enum CodingKeys: String, CodingKey {
        case project, name, createdAt, members, keyringIds, notificationKeys, complete
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        project = try container.decode(String.self, forKey: .project)
        name = try container.decode(String.self, forKey: .name)
        createdAt = try container.decode(Date.self, forKey: .createdAt)
        members = try container.decode([Member].self, forKey: .members)
        keyringIds = try container.decode([KeyringID].self, forKey: .keyringIds)
        notificationKeys = try container.decode([String].self, forKey: .notificationKeys)
        complete = try container.decodeIfPresent(Bool.self, forKey: .complete) ?? true
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(project, forKey: .project)
        try container.encode(name, forKey: .name)
        try container.encode(createdAt, forKey: .createdAt)
        try container.encode(members, forKey: .members)
        try container.encode(keyringIds, forKey: .keyringIds)
        try container.encode(notificationKeys, forKey: .notificationKeys)
        if !complete { try container.encode(false, forKey: .complete) }
    }

    public struct Member: Sendable, Hashable, Codable {
        public var token: String
        public var since: Date

        public init(token: String, since: Date) {
            self.token = token
            self.since = since
        }
    }

    public struct KeyringID: Sendable, Hashable, Codable {
        public var keyring: String
        public var group: Int64

        public init(keyring: String, group: Int64) {
            self.keyring = keyring
            self.group = group
        }
    }
}

/// A topic of a token's, with when the token subscribed.
public struct Joined: Sendable, Hashable, Codable {
    public var name: String
    public var since: Date

    public init(name: String, since: Date) {
        self.name = name
        self.since = since
    }
}
