import AudienceEngine

/// Registering and unregistering a token: the rules, once, over any store's statements
/// (`RegistryWriteDriver`), with the change-feed entries each write places.
extension RegistryWriting {
    /// Registers a new token or re-registers an unregistered one, applies `change` to its
    /// attributes and sets when it was last seen (now, unless the change says when).
    public func registerToken(
        _ token: String, change: TokenAttributeChange = TokenAttributeChange(), in project: Project
    ) async throws -> Committed<TokenInfo> {
        let committed = try await updateTokens([(token, change)], in: project)
        return Committed(committed.value[0], changes: committed.changes)
    }

    /// `registerToken(_:change:in:)` for each token, in one transaction: the tokens' infos, in order.
    public func updateTokens(_ changes: [(token: String, change: TokenAttributeChange)], in project: Project)
        async throws -> Committed<[TokenInfo]>
    {
        try await writing { driver, log in
            let now = EpochMilliseconds.now()
            // Rows held in sorted order, as every write holds them.
            let tokens = Array(Set(changes.map(\.token))).sorted()
            let rows = try await driver.reregistering(tokens, in: project, at: now, log: log)
            // A token named twice gets its changes one after the other, as two calls would.
            var merged: [String: TokenAttributeChange] = [:]
            for (token, change) in changes { merged[token] = merged[token].map { $0.then(change) } ?? change }
            try await driver.updateAttributes(
                merged.sorted { $0.key < $1.key }.map { token, change in
                    (rows[token]!.id, change, change.lastSeenAt.map(EpochMilliseconds.milliseconds) ?? now)
                })
            let infos = try await driver.tokenInfos(tokens, in: project.rowID)
            let described = tokens.compactMap { token in infos[token].map { (UInt32(rows[token]!.id), $0) } }
            log.record(
                .described(
                    project: project.rowID, tokens: described.map(\.0), values: described.map { IndexedAttributes($0.1) }))
            return try changes.map { token, _ in
                guard let info = infos[token] else {
                    throw RegistryWriteFailure("a token registered in this transaction is missing")
                }
                return info
            }
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
    /// The tokens' rows (distinct values), registered: inserted when the project has never seen
    /// them, registered again when they were unregistered; held in sorted order, by token, with one
    /// `registered` entry for the new and the re-registered.
    func reregistering(_ tokens: [String], in project: Project, at now: Int64, log: ChangeLog) async throws
        -> [String: WriteTokenRow]
    {
        var rows = try await tokensRegistering(tokens, in: project.rowID, at: now)
        var registered: [UInt32] = []
        for (token, row) in rows.sorted(by: { $0.key < $1.key }) where row.isNew || row.state == .unregistered {
            if row.state == .unregistered {
                try await setState(.registered, ofToken: row.id, at: now)
                rows[token]?.state = .registered
            }
            registered.append(UInt32(row.id))
        }
        log.record(.registered(project: project.rowID, tokens: registered.sorted()))
        return rows
    }

    /// The token's row, inserted as registered when the project has never seen it (open
    /// registration), with its `registered` entry. An unregistered token stays so. A
    /// registration call names the token: it was seen now.
    func registeringNew(_ token: String, in project: Project, at now: Int64, log: ChangeLog) async throws
        -> WriteTokenRow
    {
        let row = try await tokenRegistering(token, in: project.rowID, at: now)
        if row.isNew {
            log.record(.registered(project: project.rowID, tokens: [UInt32(row.id)]))
        } else {
            try await markSeen([row.id], at: now)
        }
        log.record(.seen(project: project.rowID, tokens: [UInt32(row.id)], day: SeenDay.of(milliseconds: now)))
        return row
    }

    /// The rows of the tokens, those the project has never seen inserted as registered, with one
    /// `registered` entry for the new ones. Unregistered tokens stay so. Every one was seen now.
    func registeringNew(_ tokens: [String], in project: Project, at now: Int64, log: ChangeLog) async throws
        -> [String: WriteTokenRow]
    {
        let rows = try await tokensRegistering(tokens, in: project.rowID, at: now)
        let new = rows.values.filter(\.isNew).map { UInt32($0.id) }
        log.record(.registered(project: project.rowID, tokens: new.sorted()))
        let known = rows.values.filter { !$0.isNew }.map(\.id)
        if !known.isEmpty { try await markSeen(known.sorted(), at: now) }
        log.record(
            .seen(project: project.rowID, tokens: rows.values.map { UInt32($0.id) }.sorted(), day: SeenDay.of(milliseconds: now)))
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
