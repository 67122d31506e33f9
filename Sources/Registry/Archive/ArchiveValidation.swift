import Conditions
import Foundation

/// The checks `import` makes on each line before it writes anything: the same rules the API
/// applies to the same values, so that nothing imported could not have been written through it.
extension ArchiveRecord {
    /// The record in its stored form (group names in NFC), or what is wrong with it.
    public func validated(limits: Limits) throws(ArchiveProblem) -> ArchiveRecord {
        switch self {
        case .header(let header):
            guard header.format == ArchiveHeader.format else {
                throw ArchiveProblem("\"format\" must be \"\(ArchiveHeader.format)\"")
            }
            guard (1...ArchiveHeader.currentVersion).contains(header.version) else {
                throw ArchiveProblem(
                    "version \(header.version) is newer than this build reads (\(ArchiveHeader.currentVersion)): import with a newer fcm-registry"
                )
            }
            return self
        case .project(let project):
            try Self.check(project)
            return self
        case .topic(let topic):
            try Self.checkProject(topic.project)
            guard TopicName.isValid(topic.name) else { throw Self.badTopic(topic.name) }
            return self
        case .token(let token):
            try Self.check(token, limits: limits)
            return self
        case .group(var group):
            try Self.checkProject(group.project)
            do {
                group.name = try GroupName.normalized(group.name, maximumBytes: limits.groupNameBytes)
            } catch {
                throw ArchiveProblem(Self.words(error))
            }
            try Self.check(group, limits: limits)
            return .group(group)
        }
    }

    private static func check(_ project: ProjectArchive) throws(ArchiveProblem) {
        do {
            try Project.validate(projectId: project.projectId, senderId: project.senderId)
        } catch {
            throw ArchiveProblem(words(error))
        }
        for key in project.serverKeys where Base64URL.decode(key.sha256)?.count != 32 {
            throw ArchiveProblem("serverKeys: \"sha256\" must be 32 bytes in URL-safe base64")
        }
        var keyIDs = Set<String>()
        for account in project.serviceAccounts {
            guard !account.keyId.isEmpty, account.keyId.utf8.count <= 256, keyIDs.insert(account.keyId).inserted else {
                throw ArchiveProblem("serviceAccounts: \"keyId\" must be 1 to 256 bytes, once per project")
            }
            guard !account.clientEmail.isEmpty, account.clientEmail.utf8.count <= 1024,
                account.clientId.utf8.count <= 256
            else {
                throw ArchiveProblem("serviceAccounts: \"clientEmail\" must be 1 to 1024 bytes")
            }
            guard account.publicKey.hasPrefix("-----BEGIN PUBLIC KEY-----"), account.publicKey.utf8.count <= 16 << 10
            else {
                throw ArchiveProblem("serviceAccounts: \"publicKey\" must be a PEM public key")
            }
            if let uri = account.tokenUri, uri.utf8.count > 2048 {
                throw ArchiveProblem("serviceAccounts: \"tokenUri\" is longer than 2048 bytes")
            }
        }
        for keyring in project.keyrings {
            guard let secret = Base64URL.decode(keyring.secret), secret.count == 32, keyring.sealedFor > 0 else {
                throw ArchiveProblem("keyrings: \"secret\" must be 32 bytes in URL-safe base64, \"sealedFor\" a row id")
            }
            guard NotificationKeyring(secret: secret, sealedFor: keyring.sealedFor).fingerprint == keyring.id else {
                throw ArchiveProblem("keyrings: \"id\" \(keyring.id) is not the fingerprint of its secret")
            }
        }
    }

    /// A token's attributes take the values the API takes (`TokenAttributes`), said in its words.
    private static func checkAttributes(_ token: TokenArchive) throws(ArchiveProblem) {
        do {
            if let locale = token.locale, try TokenAttributes.locale(locale) != locale {
                throw RegistryError.invalidTokenAttribute(.locale)
            }
            if let timeZone = token.timeZone { _ = try TokenAttributes.timeZone(timeZone) }
            if let appVersion = token.appVersion { _ = try TokenAttributes.appVersion(appVersion) }
            if let lastSeenAt = token.lastSeenAt { _ = try TokenAttributes.lastSeenAt(lastSeenAt) }
        } catch RegistryError.invalidTokenAttribute(let problem) {
            throw ArchiveProblem(
                "\"\(problem.field)\" is not a value a token's \(problem.field) takes (see PUT /api/tokens)")
        } catch {
            throw ArchiveProblem("\(error)")
        }
    }

    private static func check(_ token: TokenArchive, limits: Limits) throws(ArchiveProblem) {
        try checkProject(token.project)
        guard RegistrationToken.isWellFormed(token.token) else { throw badToken(token.token) }
        try checkAttributes(token)
        guard token.state == .registered || token.topics.isEmpty else {
            throw ArchiveProblem("an unregistered token has no topics")
        }
        guard token.topics.count <= limits.topicsPerToken else {
            throw ArchiveProblem(
                "the token has \(token.topics.count) topics, more than the \(limits.topicsPerToken) a token may have")
        }
        var seen = Set<String>()
        for topic in token.topics {
            guard TopicName.isValid(topic.name) else { throw badTopic(topic.name) }
            guard seen.insert(topic.name).inserted else { throw ArchiveProblem("topic \(topic.name) is listed twice") }
        }
    }

    private static func check(_ group: GroupArchive, limits: Limits) throws(ArchiveProblem) {
        guard (1...limits.membersPerGroup).contains(group.members.count) else {
            throw ArchiveProblem(
                "the group has \(group.members.count) members; a group has 1 to \(limits.membersPerGroup)")
        }
        var seen = Set<String>()
        for member in group.members {
            guard RegistrationToken.isWellFormed(member.token) else { throw badToken(member.token) }
            guard seen.insert(member.token).inserted else { throw ArchiveProblem("a member is listed twice") }
        }
        for key in group.notificationKeys {
            guard NotificationKeyCodec.isImportable(key) else {
                throw ArchiveProblem(
                    "notificationKeys: a notification key starts with APA91b and is at most 511 characters of [A-Za-z0-9_:.-]"
                )
            }
        }
        for id in group.keyringIds where id.group <= 0 || id.keyring.utf8.count != 32 {
            throw ArchiveProblem("keyringIds: each names a keyring of the project and a positive group id")
        }
    }

    private static func checkProject(_ projectId: String) throws(ArchiveProblem) {
        guard !projectId.isEmpty, projectId.utf8.count <= 63 else {
            throw ArchiveProblem("\"project\" must name a project")
        }
    }

    private static func badToken(_ token: String) -> ArchiveProblem {
        ArchiveProblem("\(quoted(token)) is not a registration token (1 to 4096 characters of [A-Za-z0-9_:.-])")
    }

    private static func badTopic(_ name: String) -> ArchiveProblem {
        ArchiveProblem("\(quoted(name)) is not a topic name ([a-zA-Z0-9-_.~%]{1,900})")
    }

    /// A value from the file, shortened and with its control characters escaped, for an error line.
    static func quoted(_ value: String) -> String {
        let shown = value.unicodeScalars.prefix(80).map { scalar in
            scalar.properties.generalCategory == .control || scalar == "\"" ? scalar.escaped(asASCII: true) : String(scalar)
        }.joined()
        return "\"" + shown + (value.unicodeScalars.count > 80 ? "…" : "") + "\""
    }

    private static func words(_ error: RegistryError) -> String {
        switch error {
        case .invalidProject(let words), .invalidGroupName(let words): words
        default: "\(error)"
        }
    }
}

extension NotificationKeyCodec {
    /// Whether `key` may be kept as a notification key issued elsewhere: Google's start with
    /// `APA91b`, as this registry's own do, and are drawn from the characters of tokens.
    public static func isImportable(_ key: String) -> Bool {
        key.hasPrefix(prefix) && key.utf8.count < 512 && RegistrationToken.isWellFormed(key)
    }
}
