import AudienceEngine
import Foundation
import GRDB
import Registry

/// Writes archive records inside one transaction, matching each with what is already there by
/// its natural key, so that importing a file twice is importing it once. It adds and never takes
/// away: a token keeps the topics and groups it has here, a revoked key stays revoked.
struct ArchiveImporter {
    let db: Database
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

    init(db: Database, log: ChangeLog, limits: Limits, ownSecret: [UInt8], mergingCredentials: Bool) {
        self.mergingCredentials = mergingCredentials
        self.db = db
        self.log = log
        self.limits = limits
        self.ownSecret = ownSecret
    }

    mutating func take(_ record: ArchiveRecord) throws {
        switch record {
        case .header: break
        case .project(let project): try take(project)
        case .topic(let topic):
            let project = try projectRowID(topic.project)
            _ = try topicID(topic.name, in: project, createdAt: topic.createdAt)
        case .token(let token): try take(token)
        case .group(let group): try take(group)
        }
    }

    /// Records the batch's subscriptions in the change feed, one entry per topic.
    func finish() {
        for (project, topics) in subscribed {
            for (topic, tokens) in topics.sorted(by: { $0.key < $1.key }) {
                log.record(.subscribed(project: project, topic: topic, tokens: tokens))
            }
        }
    }

    // MARK: - Projects

    private mutating func take(_ record: ProjectArchive) throws {
        let rowID: Int64
        let existed: Bool
        if let row = try Row.fetchOne(
            db, sql: "SELECT id, senderId FROM project WHERE projectId = ?", arguments: [record.projectId])
        {
            guard row["senderId"] as String == record.senderId else {
                throw ArchiveProblem(
                    "project \(record.projectId) is here with sender id \(row["senderId"] as String), not \(record.senderId)")
            }
            rowID = row["id"]
            existed = true
        } else {
            if let other = try String.fetchOne(
                db, sql: "SELECT projectId FROM project WHERE senderId = ?", arguments: [record.senderId])
            {
                throw ArchiveProblem("sender id \(record.senderId) belongs to project \(other) here")
            }
            try db.execute(
                sql: "INSERT INTO project (projectId, senderId, createdAt) VALUES (?, ?, ?)",
                arguments: [record.projectId, record.senderId, EpochMilliseconds.milliseconds(record.createdAt)])
            rowID = db.lastInsertedRowID
            existed = false
            tally.projects += 1
        }
        // A project that was here before: the file may not bring it new ways in.
        let guarded = existed && !mergingCredentials ? record.projectId : nil
        for key in record.serverKeys {
            try take(key, of: rowID, guarding: guarded)
        }
        for account in record.serviceAccounts {
            try take(account, of: rowID, guarding: guarded)
        }
        let own = NotificationKeyring(secret: ownSecret, sealedFor: rowID).fingerprint
        projects[record.projectId] = (rowID, own)
        for keyring in record.keyrings {
            guard keyring.id != own else { continue }
            try db.execute(
                sql: """
                    INSERT INTO keyring (projectId, fingerprint, secret, sealedFor, importedAt) VALUES (?, ?, ?, ?, ?)
                    ON CONFLICT (projectId, fingerprint) DO NOTHING
                    """,
                arguments: [
                    rowID, keyring.id, Data(Base64URL.decode(keyring.secret) ?? []), keyring.sealedFor, EpochMilliseconds.now(),
                ])
            if db.changesCount > 0, let guarded { throw Self.newCredential("a notification-key keyring", of: guarded) }
        }
        let keyrings = try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM keyring WHERE projectId = ?", arguments: [rowID]) ?? 0
        guard keyrings <= Self.keyringsPerProject else {
            throw ArchiveProblem(
                "project \(record.projectId) would have more than \(Self.keyringsPerProject) keyrings: each registry it came through adds one")
        }
    }

    /// Keyrings a project keeps: every lookup of a key another registry sealed tries each one.
    static let keyringsPerProject = 16

    private static func newCredential(_ what: String, of projectId: String) -> ArchiveProblem {
        ArchiveProblem(
            "project \(projectId) was already here, and the file would add \(what) to it: import with --merge-credentials if the file is trusted to"
        )
    }

    private func take(_ key: ServerKeyArchive, of project: Int64, guarding guarded: String?) throws {
        let hash = Data(Base64URL.decode(key.sha256) ?? [])
        let revokedAt = key.revokedAt.map(EpochMilliseconds.milliseconds)
        guard
            let row = try Row.fetchOne(
                db, sql: "SELECT projectId, revokedAt FROM serverKey WHERE keyHash = ?", arguments: [hash])
        else {
            if let guarded, revokedAt == nil { throw Self.newCredential("a server key", of: guarded) }
            try db.execute(
                sql: "INSERT INTO serverKey (projectId, keyHash, createdAt, revokedAt) VALUES (?, ?, ?, ?)",
                arguments: [project, hash, EpochMilliseconds.milliseconds(key.createdAt), revokedAt])
            return
        }
        guard row["projectId"] as Int64 == project else {
            throw ArchiveProblem("a server key of this project is another project's here")
        }
        if let revokedAt, row["revokedAt"] as Int64? == nil {
            try db.execute(
                sql: "UPDATE serverKey SET revokedAt = ? WHERE keyHash = ?", arguments: [revokedAt, hash])
        }
    }

    private func take(_ account: ServiceAccountArchive, of project: Int64, guarding guarded: String?) throws {
        let revokedAt = account.revokedAt.map(EpochMilliseconds.milliseconds)
        guard
            let row = try Row.fetchOne(
                db, sql: "SELECT projectId, revokedAt FROM serviceAccount WHERE keyId = ?", arguments: [account.keyId])
        else {
            if let guarded, revokedAt == nil { throw Self.newCredential("service account \(account.keyId)", of: guarded) }
            try db.execute(
                sql: """
                    INSERT INTO serviceAccount
                      (projectId, keyId, clientEmail, clientId, publicKey, tokenUri, createdAt, revokedAt)
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?)
                    """,
                arguments: [
                    project, account.keyId, account.clientEmail, account.clientId, account.publicKey, account.tokenUri,
                    EpochMilliseconds.milliseconds(account.createdAt), revokedAt,
                ])
            return
        }
        guard row["projectId"] as Int64 == project else {
            throw ArchiveProblem("service account \(account.keyId) is another project's here")
        }
        if let revokedAt, row["revokedAt"] as Int64? == nil {
            try db.execute(
                sql: "UPDATE serviceAccount SET revokedAt = ? WHERE keyId = ?", arguments: [revokedAt, account.keyId])
        }
    }

    /// The row id of a project the file declared earlier or the database already has.
    private mutating func projectRowID(_ projectId: String) throws -> Int64 {
        if let known = projects[projectId] { return known.rowID }
        guard let rowID = try Int64.fetchOne(db, sql: "SELECT id FROM project WHERE projectId = ?", arguments: [projectId])
        else {
            throw ArchiveProblem("no project \(projectId): its project record must come first")
        }
        projects[projectId] = (rowID, NotificationKeyring(secret: ownSecret, sealedFor: rowID).fingerprint)
        return rowID
    }

    // MARK: - Topics and tokens

    private mutating func topicID(_ name: String, in project: Int64, createdAt: Date) throws -> Int64 {
        if let id = topicIDs[project]?[name] { return id }
        try db.cachedStatement(
            sql: "INSERT INTO topic (projectId, name, createdAt) VALUES (?, ?, ?) ON CONFLICT (projectId, name) DO NOTHING"
        ).execute(arguments: [project, name, EpochMilliseconds.milliseconds(createdAt)])
        let id: Int64
        if db.changesCount > 0 {
            id = db.lastInsertedRowID
            tally.topics += 1
        } else {
            id = try Int64.fetchOne(
                db.cachedStatement(sql: "SELECT id FROM topic WHERE projectId = ? AND name = ?"),
                arguments: [project, name])!
        }
        topicIDs[project, default: [:]][name] = id
        return id
    }

    private mutating func take(_ record: TokenArchive) throws {
        let project = try projectRowID(record.project)
        let (id, isNew, registered) = try tokenID(
            record.token, in: project, registered: record.state == .registered, createdAt: record.createdAt,
            updatedAt: record.updatedAt)
        // Unregistered here, and staying so: a dead token has no topics.
        guard registered else { return }
        let subscribe = try db.cachedStatement(
            sql: "INSERT INTO subscription (topicId, tokenId, createdAt) VALUES (?, ?, ?) ON CONFLICT DO NOTHING")
        var added = 0
        for topic in record.topics {
            let topicID = try topicID(topic.name, in: project, createdAt: topic.since)
            try subscribe.execute(arguments: [topicID, id, EpochMilliseconds.milliseconds(topic.since)])
            if db.changesCount > 0 {
                subscribed[project, default: [:]][topic.name, default: []].append(UInt32(id))
                added += 1
            }
        }
        tally.subscriptions += added
        if !isNew, added > 0 {
            let count = try Int.fetchOne(
                db.cachedStatement(sql: "SELECT COUNT(*) FROM subscription WHERE tokenId = ?"), arguments: [id]) ?? 0
            guard count <= limits.topicsPerToken else {
                throw ArchiveProblem("the token would have more than \(limits.topicsPerToken) topics here")
            }
        }
    }

    /// The token's row id and state here, inserting it if new. A registered token of the file
    /// registers an unregistered one here again only when the file saw it later than this
    /// database did: an old export does not bring back a token reported dead since. An
    /// unregistered one of the file changes nothing that is here.
    private mutating func tokenID(
        _ value: String, in project: Int64, registered: Bool, createdAt: Date, updatedAt: Date
    ) throws -> (id: Int64, isNew: Bool, registered: Bool) {
        if let row = try Row.fetchOne(
            db.cachedStatement(sql: "SELECT id, state, updatedAt FROM token WHERE projectId = ? AND value = ?"),
            arguments: [project, value])
        {
            let id: Int64 = row["id"]
            guard row["state"] as String == TokenState.unregistered.rawValue else { return (id, false, true) }
            guard registered, EpochMilliseconds.milliseconds(updatedAt) > row["updatedAt"] as Int64 else { return (id, false, false) }
            try db.cachedStatement(sql: "UPDATE token SET state = 'registered', updatedAt = ? WHERE id = ?")
                .execute(arguments: [EpochMilliseconds.milliseconds(updatedAt), id])
            log.record(.registered(project: project, tokens: [UInt32(id)]))
            return (id, false, true)
        }
        try db.cachedStatement(
            sql: "INSERT INTO token (projectId, value, state, createdAt, updatedAt) VALUES (?, ?, ?, ?, ?)"
        ).execute(arguments: [
            project, value, registered ? "registered" : "unregistered", EpochMilliseconds.milliseconds(createdAt),
            EpochMilliseconds.milliseconds(updatedAt),
        ])
        let id = db.lastInsertedRowID
        tally.tokens += 1
        if registered { log.record(.registered(project: project, tokens: [UInt32(id)])) }
        return (id, true, registered)
    }

    // MARK: - Groups

    private mutating func take(_ record: GroupArchive) throws {
        let project = try projectRowID(record.project)
        let groupID: Int64
        if let id = try Int64.fetchOne(
            db.cachedStatement(sql: "SELECT id FROM deviceGroup WHERE projectId = ? AND name = ?"),
            arguments: [project, record.name])
        {
            groupID = id
            // What was missing is still missing: a group merged with an incomplete one is incomplete.
            if !record.complete {
                try db.cachedStatement(sql: "UPDATE deviceGroup SET complete = 0 WHERE id = ?").execute(arguments: [id])
            }
        } else {
            try db.cachedStatement(
                sql: "INSERT INTO deviceGroup (projectId, name, createdAt, complete) VALUES (?, ?, ?, ?)"
            ).execute(arguments: [project, record.name, EpochMilliseconds.milliseconds(record.createdAt), record.complete])
            groupID = db.lastInsertedRowID
            tally.groups += 1
        }
        let join = try db.cachedStatement(
            sql: "INSERT INTO groupMember (groupId, tokenId, addedAt) VALUES (?, ?, ?) ON CONFLICT DO NOTHING")
        for member in record.members {
            let (tokenID, _, registered) = try tokenID(
                member.token, in: project, registered: true, createdAt: member.since, updatedAt: member.since)
            // As the API does: a token reported dead does not join a group.
            guard registered else { continue }
            try join.execute(arguments: [groupID, tokenID, EpochMilliseconds.milliseconds(member.since)])
            tally.members += db.changesCount
        }
        let count = try Int.fetchOne(
            db.cachedStatement(sql: "SELECT COUNT(*) FROM groupMember WHERE groupId = ?"), arguments: [groupID]) ?? 0
        guard count <= limits.membersPerGroup else {
            throw ArchiveProblem("group \(record.name) would have more than \(limits.membersPerGroup) members here")
        }
        guard count > 0 else {
            // Every member was reported dead here since: as with its last removal, no group.
            try db.cachedStatement(sql: "DELETE FROM deviceGroup WHERE id = ?").execute(arguments: [groupID])
            tally.groups -= 1
            return
        }
        for id in record.keyringIds {
            guard let keyring = try keyringRowID(id.keyring, in: project, projectId: record.project) else { continue }
            try db.cachedStatement(
                sql: """
                    INSERT INTO keyringGroup (keyringId, sourceGroupId, groupId) VALUES (?, ?, ?)
                    ON CONFLICT (keyringId, sourceGroupId) DO UPDATE SET groupId = excluded.groupId
                    """
            ).execute(arguments: [keyring, id.group, groupID])
        }
        for key in record.notificationKeys {
            try keep(key, naming: groupID, in: project)
        }
    }

    /// The row id of a keyring the project's record brought; `nil` for the database's own.
    private mutating func keyringRowID(_ fingerprint: String, in project: Int64, projectId: String) throws -> Int64? {
        if let known = keyrings[project]?[fingerprint] { return known }
        if fingerprint == projects[projectId]?.ownKeyring { return nil }
        guard
            let id = try Int64.fetchOne(
                db.cachedStatement(sql: "SELECT id FROM keyring WHERE projectId = ? AND fingerprint = ?"),
                arguments: [project, fingerprint])
        else {
            throw ArchiveProblem("keyring \(fingerprint) is not one of project \(projectId)'s (its record lists them)")
        }
        keyrings[project, default: [:]][fingerprint] = id
        return id
    }

    /// Keeps a notification key issued elsewhere as a name of the group.
    private mutating func keep(_ key: String, naming groupID: Int64, in project: Int64) throws {
        try db.cachedStatement(
            sql: """
                INSERT INTO importedKey (projectId, notificationKey, groupId, importedAt) VALUES (?, ?, ?, ?)
                ON CONFLICT (projectId, notificationKey) DO UPDATE SET groupId = excluded.groupId
                WHERE importedKey.groupId IS NULL
                """
        ).execute(arguments: [project, key, groupID, EpochMilliseconds.now()])
        if db.changesCount > 0 {
            tally.notificationKeys += 1
            return
        }
        let named = try Row.fetchOne(
            db.cachedStatement(
                sql: """
                    SELECT deviceGroup.id, deviceGroup.name FROM importedKey
                    JOIN deviceGroup ON deviceGroup.id = importedKey.groupId
                    WHERE importedKey.projectId = ? AND importedKey.notificationKey = ?
                    """), arguments: [project, key])
        if let named, named["id"] as Int64 != groupID {
            throw ArchiveProblem("notification key \(key.prefix(16))… already names group \(named["name"] as String)")
        }
    }
}
