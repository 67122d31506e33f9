import AudienceEngine

/// Registering and unregistering a token: the rules, once, over any store's statements
/// (`RegistryWriteDriver`), with the change-feed entries each write places.
extension RegistryWriting {
    /// Registers a new token or re-registers an unregistered one.
    public func registerToken(_ token: String, in project: Project) async throws -> Committed<TokenInfo> {
        try await writing { driver, log in
            _ = try await driver.reregistering(token, in: project, at: EpochMilliseconds.now(), log: log)
            guard let info = try await driver.tokenInfo(token, in: project.rowID) else {
                throw RegistryWriteFailure("a token registered in this transaction is missing")
            }
            return info
        }
    }

    /// Marks the token unregistered and removes it from every topic and group (removing those it
    /// empties), all at once. Returns `nil` when the project does not know the token; writes
    /// `audit`'s entry in the same transaction when it does.
    /// Isolation: serialized per token, and per group it leaves.
    public func unregisterToken(_ token: String, in project: Project, audit: AuditWrite?) async throws
        -> Committed<TokenInfo?>
    {
        try await writing { driver, log in
            guard let row = try await driver.token(token, in: project.rowID) else { return nil }
            try await driver.insertAudit(audit)
            try await driver.setState(.unregistered, ofToken: row.id, at: EpochMilliseconds.now())
            for topic in try await driver.leaveTopics(row.id) {
                try await driver.deleteTopicIfEmpty(topic.id)
                log.record(.unsubscribed(project: project.rowID, topic: topic.name, tokens: [UInt32(row.id)]))
            }
            try await driver.deleteGroupsEmptied(try await driver.leaveGroups(row.id))
            log.record(.unregistered(project: project.rowID, tokens: [UInt32(row.id)]))
            return try await driver.tokenInfo(token, in: project.rowID)
        }
    }
}

extension RegistryWriteDriver {
    /// The token's row, registered: inserted when the project has never seen it, registered again
    /// when it was unregistered; `registered` goes to the feed either way.
    func reregistering(_ token: String, in project: Project, at now: Int64, log: ChangeLog) async throws
        -> WriteTokenRow
    {
        var row = try await tokenRegistering(token, in: project.rowID, at: now)
        if row.isNew { log.record(.registered(project: project.rowID, tokens: [UInt32(row.id)])) }
        if row.state == .unregistered {
            try await setState(.registered, ofToken: row.id, at: now)
            log.record(.registered(project: project.rowID, tokens: [UInt32(row.id)]))
            row.state = .registered
        }
        return row
    }

    /// The token's row, inserted as registered when the project has never seen it (open
    /// registration), with its `registered` entry. An unregistered token stays so.
    func registeringNew(_ token: String, in project: Project, at now: Int64, log: ChangeLog) async throws
        -> WriteTokenRow
    {
        let row = try await tokenRegistering(token, in: project.rowID, at: now)
        if row.isNew { log.record(.registered(project: project.rowID, tokens: [UInt32(row.id)])) }
        return row
    }

    /// The rows of the tokens, those the project has never seen inserted as registered, with one
    /// `registered` entry for the new ones. Unregistered tokens stay so.
    func registeringNew(_ tokens: [String], in project: Project, at now: Int64, log: ChangeLog) async throws
        -> [String: WriteTokenRow]
    {
        let rows = try await tokensRegistering(tokens, in: project.rowID, at: now)
        let new = rows.values.filter(\.isNew).map { UInt32($0.id) }
        log.record(.registered(project: project.rowID, tokens: new.sorted()))
        return rows
    }

    /// A group exists while it has members: removes each of `groups` left with none.
    func deleteGroupsEmptied(_ groups: [Int64]) async throws {
        for group in groups where try await memberCount(of: group) == 0 {
            try await deleteGroup(group)
        }
    }
}

/// A write found the database in a state its own statements cannot have left it in.
public struct RegistryWriteFailure: Error, CustomStringConvertible {
    public var description: String

    public init(_ description: String) { self.description = description }
}
