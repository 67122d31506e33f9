import AudienceEngine
import Foundation
import PostgresNIO
import Registry

/// Writes archive records inside one transaction, matching each with what is already there by
/// its natural key, so that importing a file twice is importing it once. It adds and never takes
/// away: a token keeps the topics and groups it has here, a revoked key stays revoked. The same
/// rules, in the same words, as the SQLite store's `ArchiveImporter`.
final class PostgresArchiveImporter {
    let connection: PostgresConnection
    let log: ChangeLog
    let limits: Limits
    let ownSecret: [UInt8]
    /// Whether credentials may be added to projects that were here before the file's record.
    let mergingCredentials: Bool
    private(set) var tally = ImportTally()
    /// Project row ids by project id, and each project's own keyring fingerprint.
    private var projects: [String: (rowID: Int64, ownKeyring: String)] = [:]
    /// Keyring row ids by project row id and fingerprint; `nil` for the database's own keyring.
    private var keyrings: [Int64: [String: Int64?]] = [:]
    private var topicIDs: [Int64: [String: Int64]] = [:]
    /// Tokens newly subscribed, by project and topic: one feed entry per topic per batch.
    private var subscribed: [Int64: [String: [UInt32]]] = [:]
    /// Token records not written yet, with their lines: written a few hundred at a time, in a
    /// handful of statements, so that a copy costs round trips per page, not per row.
    private var pendingTokens: [(record: TokenArchive, line: Int)] = []
    static let tokensPerWrite = 500

    /// Keyrings a project keeps: every lookup of a key another registry sealed tries each one.
    static let keyringsPerProject = 16

    init(connection: PostgresConnection, log: ChangeLog, limits: Limits, ownSecret: [UInt8], mergingCredentials: Bool) {
        self.connection = connection
        self.log = log
        self.limits = limits
        self.ownSecret = ownSecret
        self.mergingCredentials = mergingCredentials
    }

    /// Takes one record; a token waits for the next write of tokens, every other record writes
    /// the waiting tokens first, so that records take effect in the file's order.
    /// - Throws: `ImportError` naming the line of the record it could not take.
    func take(_ record: ArchiveRecord, line: Int) async throws {
        if case .token(let token) = record {
            pendingTokens.append((token, line))
            if pendingTokens.count >= Self.tokensPerWrite { try await writeTokens() }
            return
        }
        try await writeTokens()
        do {
            switch record {
            case .header, .token: break
            case .project(let project): try await take(project)
            case .topic(let topic):
                let project = try await projectRowID(topic.project)
                _ = try await topicID(topic.name, in: project, createdAt: topic.createdAt)
            case .group(let group): try await take(group)
            }
        } catch let problem as ArchiveProblem {
            throw ImportError(line: line, problem: problem.message)
        }
    }

    /// Records the batch's subscriptions in the change feed, one entry per topic.
    func finish() async throws {
        try await writeTokens()
        for (project, topics) in subscribed {
            for (topic, tokens) in topics.sorted(by: { $0.key < $1.key }) {
                log.record(.subscribed(project: project, topic: topic, tokens: tokens))
            }
        }
    }

    // MARK: - Projects

    private func take(_ record: ProjectArchive) async throws {
        let rowID: Int64
        let existed: Bool
        if let (id, senderID) = try await connection.first(
            #"SELECT id, "senderId" FROM project WHERE "projectId" = \#(record.projectId)"#, as: (Int64, String).self)
        {
            guard senderID == record.senderId else {
                throw ArchiveProblem("project \(record.projectId) is here with sender id \(senderID), not \(record.senderId)")
            }
            (rowID, existed) = (id, true)
        } else {
            if let other = try await connection.first(
                #"SELECT "projectId" FROM project WHERE "senderId" = \#(record.senderId)"#, as: String.self)
            {
                throw ArchiveProblem("sender id \(record.senderId) belongs to project \(other) here")
            }
            rowID = try await connection.one(
                #"""
                INSERT INTO project ("projectId", "senderId", "createdAt")
                VALUES (\#(record.projectId), \#(record.senderId), \#(EpochMilliseconds.milliseconds(record.createdAt))) RETURNING id
                """#, as: Int64.self)
            existed = false
            tally.projects += 1
        }
        // A project that was here before: the file may not bring it new ways in.
        let guarded = existed && !mergingCredentials ? record.projectId : nil
        for key in record.serverKeys { try await take(key, of: rowID, guarding: guarded) }
        for account in record.serviceAccounts { try await take(account, of: rowID, guarding: guarded) }
        let own = NotificationKeyring(secret: ownSecret, sealedFor: rowID).fingerprint
        projects[record.projectId] = (rowID, own)
        for keyring in record.keyrings where keyring.id != own {
            let added = try await connection.count(
                #"""
                INSERT INTO keyring ("projectId", fingerprint, secret, "sealedFor", "importedAt")
                VALUES (\#(rowID), \#(keyring.id), \#(Data(Base64URL.decode(keyring.secret) ?? [])), \#(keyring.sealedFor), \#(EpochMilliseconds.now()))
                ON CONFLICT ("projectId", fingerprint) DO NOTHING RETURNING 1
                """#)
            if added > 0, let guarded { throw Self.newCredential("a notification-key keyring", of: guarded) }
        }
        let count = try await connection.one(
            #"SELECT COUNT(*)::bigint FROM keyring WHERE "projectId" = \#(rowID)"#, as: Int64.self)
        guard count <= Self.keyringsPerProject else {
            throw ArchiveProblem(
                "project \(record.projectId) would have more than \(Self.keyringsPerProject) keyrings: each registry it came through adds one")
        }
    }

    private static func newCredential(_ what: String, of projectId: String) -> ArchiveProblem {
        ArchiveProblem(
            "project \(projectId) was already here, and the file would add \(what) to it: import with --merge-credentials if the file is trusted to"
        )
    }

    private func take(_ key: ServerKeyArchive, of project: Int64, guarding guarded: String?) async throws {
        let hash = Data(Base64URL.decode(key.sha256) ?? [])
        let revokedAt = key.revokedAt.map(EpochMilliseconds.milliseconds)
        guard
            let (owner, revoked) = try await connection.first(
                #"SELECT "projectId", "revokedAt" FROM "serverKey" WHERE "keyHash" = \#(hash)"#, as: (Int64, Int64?).self)
        else {
            if let guarded, revokedAt == nil { throw Self.newCredential("a server key", of: guarded) }
            try await connection.run(
                #"""
                INSERT INTO "serverKey" ("projectId", "keyHash", "createdAt", "revokedAt")
                VALUES (\#(project), \#(hash), \#(EpochMilliseconds.milliseconds(key.createdAt)), \#(revokedAt))
                """#)
            return
        }
        guard owner == project else { throw ArchiveProblem("a server key of this project is another project's here") }
        if let revokedAt, revoked == nil {
            try await connection.run(#"UPDATE "serverKey" SET "revokedAt" = \#(revokedAt) WHERE "keyHash" = \#(hash)"#)
        }
    }

    private func take(_ account: ServiceAccountArchive, of project: Int64, guarding guarded: String?) async throws {
        let revokedAt = account.revokedAt.map(EpochMilliseconds.milliseconds)
        guard
            let (owner, revoked) = try await connection.first(
                #"SELECT "projectId", "revokedAt" FROM "serviceAccount" WHERE "keyId" = \#(account.keyId)"#,
                as: (Int64, Int64?).self)
        else {
            if let guarded, revokedAt == nil { throw Self.newCredential("service account \(account.keyId)", of: guarded) }
            try await connection.run(
                #"""
                INSERT INTO "serviceAccount" ("projectId", "keyId", "clientEmail", "clientId", "publicKey", "tokenUri", "createdAt", "revokedAt")
                VALUES (\#(project), \#(account.keyId), \#(account.clientEmail), \#(account.clientId), \#(account.publicKey),
                        \#(account.tokenUri), \#(EpochMilliseconds.milliseconds(account.createdAt)), \#(revokedAt))
                """#)
            return
        }
        guard owner == project else { throw ArchiveProblem("service account \(account.keyId) is another project's here") }
        if let revokedAt, revoked == nil {
            try await connection.run(
                #"UPDATE "serviceAccount" SET "revokedAt" = \#(revokedAt) WHERE "keyId" = \#(account.keyId)"#)
        }
    }

    /// The row id of a project the file declared earlier or the database already has.
    private func projectRowID(_ projectId: String) async throws -> Int64 {
        if let known = projects[projectId] { return known.rowID }
        guard let rowID = try await connection.first(#"SELECT id FROM project WHERE "projectId" = \#(projectId)"#, as: Int64.self)
        else { throw ArchiveProblem("no project \(projectId): its project record must come first") }
        projects[projectId] = (rowID, NotificationKeyring(secret: ownSecret, sealedFor: rowID).fingerprint)
        return rowID
    }

    // MARK: - Topics and tokens

    /// The topic's id, created if missing and held `FOR KEY SHARE` until the batch commits, as
    /// every subscriber holds it: no write removes it as empty meanwhile.
    private func topicID(_ name: String, in project: Int64, createdAt: Date) async throws -> Int64 {
        if let id = topicIDs[project]?[name] { return id }
        let (id, created) = try await connection.heldTopic(
            name, inProject: project, createdAt: EpochMilliseconds.milliseconds(createdAt))
        if created { tally.topics += 1 }
        topicIDs[project, default: [:]][name] = id
        return id
    }

    /// Writes the waiting token records: new tokens in one statement, the known ones read in one,
    /// their subscriptions in one, the topic limit checked in one.
    private func writeTokens() async throws {
        guard !pendingTokens.isEmpty else { return }
        let batch = pendingTokens
        pendingTokens = []
        var byProject: [Int64: [(record: TokenArchive, line: Int)]] = [:]
        for item in batch {
            do {
                byProject[try await projectRowID(item.record.project), default: []].append(item)
            } catch let problem as ArchiveProblem {
                throw ImportError(line: item.line, problem: problem.message)
            }
        }
        for (project, items) in byProject.sorted(by: { $0.key < $1.key }) {
            try await writeTokens(items, in: project)
        }
    }

    private func writeTokens(_ items: [(record: TokenArchive, line: Int)], in project: Int64) async throws {
        // 1. New tokens, as the file has them.
        var rows: [String: (id: Int32, isNew: Bool, registered: Bool)] = [:]
        let values = items.map(\.record.token)
        for try await (id, value, state) in try await connection.query(
            #"""
            INSERT INTO token ("projectId", value, state, "createdAt", "updatedAt")
            SELECT \#(project), value, state, created, updated
            FROM unnest(\#(values)::text[], \#(items.map { $0.record.state.rawValue })::text[],
                        \#(items.map { EpochMilliseconds.milliseconds($0.record.createdAt) })::bigint[],
                        \#(items.map { EpochMilliseconds.milliseconds($0.record.updatedAt) })::bigint[])
                 AS listed(value, state, created, updated)
            ON CONFLICT ("projectId", value) DO NOTHING RETURNING id, value, state
            """#, logger: .silent
        ).decode((Int32, String, String).self) {
            rows[value] = (id, true, state == TokenState.registered.rawValue)
        }
        tally.tokens += rows.count
        let registeredNew = rows.values.filter(\.registered).map { UInt32($0.id) }.sorted()
        log.record(.registered(project: project, tokens: registeredNew))
        // 2. Known tokens: one registered again only when the file saw it later than this database did.
        let known = Array(Set(values.filter { rows[$0] == nil }))
        if !known.isEmpty {
            var found: [String: (id: Int32, state: String, stamp: Int64)] = [:]
            for try await (id, value, state, stamp) in try await connection.query(
                #"SELECT id, value, state, "updatedAt" FROM token WHERE "projectId" = \#(project) AND value = ANY(\#(known))"#,
                logger: .silent
            ).decode((Int32, String, String, Int64).self) { found[value] = (id, state, stamp) }
            for (record, _) in items where rows[record.token] == nil {
                guard let row = found[record.token] else { continue }
                if row.state != TokenState.unregistered.rawValue {
                    rows[record.token] = (row.id, false, true)
                } else if record.state == .registered, EpochMilliseconds.milliseconds(record.updatedAt) > row.stamp {
                    try await connection.run(
                        #"UPDATE token SET state = 'registered', "updatedAt" = \#(EpochMilliseconds.milliseconds(record.updatedAt)) WHERE id = \#(row.id)"#)
                    log.record(.registered(project: project, tokens: [UInt32(row.id)]))
                    rows[record.token] = (row.id, false, true)
                } else {
                    rows[record.token] = (row.id, false, false)
                }
            }
        }
        // 3. Subscriptions of registered tokens (a dead token has no topics).
        var topicNames: [Int64: String] = [:]
        var topicColumn: [Int64] = []
        var tokenColumn: [Int32] = []
        var sinceColumn: [Int64] = []
        var lines: [Int32: Int] = [:]
        for (record, line) in items {
            guard let row = rows[record.token], row.registered else { continue }
            lines[row.id] = lines[row.id] ?? line
            for topic in record.topics {
                let id: Int64
                do {
                    id = try await topicID(topic.name, in: project, createdAt: topic.since)
                } catch let problem as ArchiveProblem {
                    throw ImportError(line: line, problem: problem.message)
                }
                topicNames[id] = topic.name
                topicColumn.append(id)
                tokenColumn.append(row.id)
                sinceColumn.append(EpochMilliseconds.milliseconds(topic.since))
            }
        }
        guard !topicColumn.isEmpty else { return }
        var added: [Int32: Int] = [:]
        for try await (topicID, tokenID) in try await connection.query(
            #"""
            INSERT INTO subscription ("topicId", "tokenId", "createdAt")
            SELECT topic, token, since FROM unnest(\#(topicColumn)::bigint[], \#(tokenColumn)::integer[], \#(sinceColumn)::bigint[])
                 AS listed(topic, token, since)
            ON CONFLICT DO NOTHING RETURNING "topicId", "tokenId"
            """#, logger: .silent
        ).decode((Int64, Int32).self) {
            subscribed[project, default: [:]][topicNames[topicID] ?? "", default: []].append(UInt32(tokenID))
            added[tokenID, default: 0] += 1
        }
        tally.subscriptions += added.values.reduce(0, +)
        // 4. The topic limit, for tokens that were here before and gained topics.
        let grown = rows.values.filter { !$0.isNew && added[$0.id] != nil }.map(\.id)
        guard !grown.isEmpty else { return }
        for try await (tokenID, count) in try await connection.query(
            #"""
            SELECT "tokenId", COUNT(*)::bigint FROM subscription WHERE "tokenId" = ANY(\#(grown)) GROUP BY "tokenId"
            HAVING COUNT(*) > \#(Int64(limits.topicsPerToken))
            """#, logger: .silent
        ).decode((Int32, Int64).self) {
            _ = count
            throw ImportError(
                line: lines[tokenID] ?? 0, problem: "the token would have more than \(limits.topicsPerToken) topics here")
        }
    }

    /// The token's row id and state here, inserting it if new. A registered token of the file
    /// registers an unregistered one here again only when the file saw it later than this
    /// database did: an old export does not bring back a token reported dead since.
    private func tokenID(_ value: String, in project: Int64, registered: Bool, createdAt: Date, updatedAt: Date)
        async throws -> (id: Int32, isNew: Bool, registered: Bool)
    {
        if let (id, state, stamp) = try await connection.first(
            #"SELECT id, state, "updatedAt" FROM token WHERE "projectId" = \#(project) AND value = \#(value)"#,
            as: (Int32, String, Int64).self)
        {
            guard state == TokenState.unregistered.rawValue else { return (id, false, true) }
            guard registered, EpochMilliseconds.milliseconds(updatedAt) > stamp else { return (id, false, false) }
            try await connection.run(
                #"UPDATE token SET state = 'registered', "updatedAt" = \#(EpochMilliseconds.milliseconds(updatedAt)) WHERE id = \#(id)"#)
            log.record(.registered(project: project, tokens: [UInt32(id)]))
            return (id, false, true)
        }
        let id = try await connection.one(
            #"""
            INSERT INTO token ("projectId", value, state, "createdAt", "updatedAt")
            VALUES (\#(project), \#(value), \#(registered ? "registered" : "unregistered"),
                    \#(EpochMilliseconds.milliseconds(createdAt)), \#(EpochMilliseconds.milliseconds(updatedAt)))
            RETURNING id
            """#, as: Int32.self)
        tally.tokens += 1
        if registered { log.record(.registered(project: project, tokens: [UInt32(id)])) }
        return (id, true, registered)
    }

    // MARK: - Groups

    private func take(_ record: GroupArchive) async throws {
        let project = try await projectRowID(record.project)
        let groupID: Int64
        if let id = try await connection.first(
            #"SELECT id FROM "deviceGroup" WHERE "projectId" = \#(project) AND name = \#(record.name)"#, as: Int64.self)
        {
            groupID = id
            // What was missing is still missing: a group merged with an incomplete one is incomplete.
            if !record.complete { try await connection.run(#"UPDATE "deviceGroup" SET complete = false WHERE id = \#(id)"#) }
        } else {
            groupID = try await connection.one(
                #"""
                INSERT INTO "deviceGroup" ("projectId", name, "createdAt", complete)
                VALUES (\#(project), \#(record.name), \#(EpochMilliseconds.milliseconds(record.createdAt)), \#(record.complete))
                RETURNING id
                """#, as: Int64.self)
            tally.groups += 1
        }
        for member in record.members {
            let (tokenID, _, registered) = try await tokenID(
                member.token, in: project, registered: true, createdAt: member.since, updatedAt: member.since)
            // As the API does: a token reported dead does not join a group.
            guard registered else { continue }
            tally.members += try await connection.count(
                #"""
                INSERT INTO "groupMember" ("groupId", "tokenId", "addedAt") VALUES (\#(groupID), \#(tokenID), \#(EpochMilliseconds.milliseconds(member.since)))
                ON CONFLICT DO NOTHING RETURNING 1
                """#)
        }
        let count = try await connection.one(
            #"SELECT COUNT(*)::bigint FROM "groupMember" WHERE "groupId" = \#(groupID)"#, as: Int64.self)
        guard count <= limits.membersPerGroup else {
            throw ArchiveProblem("group \(record.name) would have more than \(limits.membersPerGroup) members here")
        }
        guard count > 0 else {
            // Every member was reported dead here since: as with its last removal, no group.
            try await connection.run(#"DELETE FROM "deviceGroup" WHERE id = \#(groupID)"#)
            tally.groups -= 1
            return
        }
        for id in record.keyringIds {
            guard let keyring = try await keyringRowID(id.keyring, in: project, projectId: record.project) else { continue }
            try await connection.run(
                #"""
                INSERT INTO "keyringGroup" ("keyringId", "sourceGroupId", "groupId") VALUES (\#(keyring), \#(id.group), \#(groupID))
                ON CONFLICT ("keyringId", "sourceGroupId") DO UPDATE SET "groupId" = excluded."groupId"
                """#)
        }
        for key in record.notificationKeys { try await keep(key, naming: groupID, in: project) }
    }

    /// The row id of a keyring the project's record brought; `nil` for the database's own.
    private func keyringRowID(_ fingerprint: String, in project: Int64, projectId: String) async throws -> Int64? {
        if let known = keyrings[project]?[fingerprint] { return known }
        if fingerprint == projects[projectId]?.ownKeyring { return nil }
        guard
            let id = try await connection.first(
                #"SELECT id FROM keyring WHERE "projectId" = \#(project) AND fingerprint = \#(fingerprint)"#, as: Int64.self)
        else { throw ArchiveProblem("keyring \(fingerprint) is not one of project \(projectId)'s (its record lists them)") }
        keyrings[project, default: [:]][fingerprint] = id
        return id
    }

    /// Keeps a notification key issued elsewhere as a name of the group.
    private func keep(_ key: String, naming groupID: Int64, in project: Int64) async throws {
        if try await connection.count(
            #"""
            INSERT INTO "importedKey" ("projectId", "notificationKey", "groupId", "importedAt")
            VALUES (\#(project), \#(key), \#(groupID), \#(EpochMilliseconds.now()))
            ON CONFLICT ("projectId", "notificationKey") DO UPDATE SET "groupId" = excluded."groupId"
            WHERE "importedKey"."groupId" IS NULL
            RETURNING 1
            """#) > 0
        {
            tally.notificationKeys += 1
            return
        }
        if let (namedID, name) = try await connection.first(
            #"""
            SELECT "deviceGroup".id, "deviceGroup".name FROM "importedKey"
            JOIN "deviceGroup" ON "deviceGroup".id = "importedKey"."groupId"
            WHERE "importedKey"."projectId" = \#(project) AND "importedKey"."notificationKey" = \#(key)
            """#, as: (Int64, String).self), namedID != groupID
        {
            throw ArchiveProblem("notification key \(key.prefix(16))… already names group \(name)")
        }
    }
}

/// `import` and `import-groups` on PostgreSQL.
extension PostgresStore: ArchiveStore {
    public func exportSize(project: String?) async throws -> Int {
        let count = try await database.withConnection { connection in
            try await connection.one(
                #"""
                WITH chosen AS (SELECT id FROM project WHERE \#(project)::text IS NULL OR "projectId" = \#(project))
                SELECT (SELECT count(*) FROM chosen)
                    + (SELECT count(*) FROM topic WHERE "projectId" IN (SELECT id FROM chosen))
                    + (SELECT count(*) FROM token WHERE "projectId" IN (SELECT id FROM chosen))
                    + (SELECT count(*) FROM "deviceGroup" WHERE "projectId" IN (SELECT id FROM chosen))
                """#, as: Int64.self)
        }
        return Int(count)
    }

    /// The batch in one transaction; with `rollingBack`, the transaction is rolled back once
    /// every record was taken (`CheckedBatch` carries the tally out).
    public func importBatch(
        _ records: [NumberedRecord], limits: Limits, ownSecret: [UInt8], mergingCredentials: Bool, rollingBack: Bool
    ) async throws -> Committed<ImportTally> {
        try await committing { connection, log in
            let importer = PostgresArchiveImporter(
                connection: connection, log: log, limits: limits, ownSecret: ownSecret, mergingCredentials: mergingCredentials)
            var line = 0
            do {
                for numbered in records {
                    line = numbered.line
                    try await importer.take(numbered.record, line: numbered.line)
                }
                try await importer.finish()
            } catch let error as PSQLError where error.serverInfo?[.sqlState]?.hasPrefix("23") == true {
                // A batch of tokens is written at once: the line is the last one read.
                throw ImportError(line: line, problem: "conflicts with what is here: \(error.serverInfo?[.message] ?? "")")
            }
            if rollingBack { throw CheckedBatch(tally: importer.tally) }
            return importer.tally
        }
    }

    /// Each empty topic is removed as a write removes one: locked first, then looked at again, so
    /// that a topic a running write is subscribing to stays.
    public func finishImport() async throws {
        let empty = try await database.withConnection { connection in
            var empty: [Int64] = []
            for try await id in try await connection.query(
                #"SELECT id FROM topic WHERE NOT EXISTS (SELECT 1 FROM subscription WHERE subscription."topicId" = topic.id)"#,
                logger: .silent
            ).decode(Int64.self) { empty.append(id) }
            return empty
        }
        for id in empty {
            try await transaction { connection in try await connection.removeTopicIfEmpty(id) }
        }
    }
}
