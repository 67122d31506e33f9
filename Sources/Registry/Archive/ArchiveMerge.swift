import AudienceEngine
import Foundation

/// Merges a batch of checked archive records into a store, inside the batch's transaction,
/// matching each with what is already there by its natural key, so that importing a file twice
/// is importing it once. It adds and never takes away: a token keeps the topics and groups it
/// has here, a revoked key stays revoked.
///
/// Every rule of the merge is here, once; each store only runs the statements of its
/// ``ArchiveMergeDriver``. Token records are written a few hundred at a time, so that a store
/// with round trips pays them per page of tokens, not per token.
public final class ArchiveMerge<Driver: ArchiveMergeDriver> {
    let driver: Driver
    let log: ChangeLog
    let limits: Limits
    let ownSecret: [UInt8]
    /// Whether credentials may be added to projects that were here before the file's record.
    let mergingCredentials: Bool
    var tally = ImportTally()
    /// Project row ids by project id, and each project's own keyring fingerprint.
    var projects: [String: (rowID: Int64, ownKeyring: String)] = [:]
    /// Keyring row ids by project row id and fingerprint.
    var keyrings: [Int64: [String: Int64]] = [:]
    var topicIDs: [Int64: [String: Int64]] = [:]
    /// Tokens newly subscribed, by project and topic: one feed entry per topic per batch.
    var subscribed: [Int64: [String: [UInt32]]] = [:]
    /// Token records not written yet, with their lines.
    var pendingTokens: [(record: TokenArchive, line: Int)] = []

    /// Token records written together.
    static var tokensPerWrite: Int { 500 }
    /// Keyrings a project keeps: every lookup of a key another registry sealed tries each one.
    static var keyringsPerProject: Int { 16 }

    init(driver: Driver, log: ChangeLog, limits: Limits, ownSecret: [UInt8], mergingCredentials: Bool) {
        self.driver = driver
        self.log = log
        self.limits = limits
        self.ownSecret = ownSecret
        self.mergingCredentials = mergingCredentials
    }

    /// Merges the batch and records its changes in `log`
    /// (``ArchiveStore/importBatch(_:limits:ownSecret:mergingCredentials:rollingBack:)`` says how).
    /// - Throws: `ImportError` naming the line of the first record it could not take;
    ///   `CheckedBatch` with the tally when `rollingBack`, once every record was taken.
    public static func run(
        _ records: [NumberedRecord], over driver: Driver, log: ChangeLog, limits: Limits, ownSecret: [UInt8],
        mergingCredentials: Bool, rollingBack: Bool
    ) async throws -> ImportTally {
        let merge = ArchiveMerge(
            driver: driver, log: log, limits: limits, ownSecret: ownSecret, mergingCredentials: mergingCredentials)
        var line = 0
        do {
            for numbered in records {
                line = numbered.line
                try await merge.take(numbered.record, line: numbered.line)
            }
            try await merge.finish()
        } catch {
            guard let words = driver.conflict(in: error) else { throw error }
            // Tokens are written a page at a time: the line is the last one read.
            throw ImportError(line: line, problem: "conflicts with what is here: \(words)")
        }
        if rollingBack { throw CheckedBatch(tally: merge.tally) }
        return merge.tally
    }

    /// Takes one record; a token waits for the next write of tokens, every other record writes
    /// the waiting tokens first, so that records take effect in the file's order.
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

    /// Writes the tokens still waiting, then records the batch's subscriptions in the change
    /// feed, one entry per topic.
    func finish() async throws {
        try await writeTokens()
        for (project, topics) in subscribed.sorted(by: { $0.key < $1.key }) {
            for (topic, tokens) in topics.sorted(by: { $0.key < $1.key }) {
                log.record(.subscribed(project: project, topic: topic, tokens: tokens))
            }
        }
    }

    // MARK: - Projects

    private func take(_ record: ProjectArchive) async throws {
        let rowID: Int64
        let existed: Bool
        if let (id, senderId) = try await driver.project(record.projectId) {
            guard senderId == record.senderId else {
                throw ArchiveProblem(
                    "project \(record.projectId) is here with sender id \(senderId), not \(record.senderId)")
            }
            (rowID, existed) = (id, true)
        } else {
            if let other = try await driver.project(sendingAs: record.senderId) {
                throw ArchiveProblem("sender id \(record.senderId) belongs to project \(other) here")
            }
            rowID = try await driver.insertProject(record)
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
            let added = try await driver.insertKeyring(
                keyring.id, secret: Base64URL.decode(keyring.secret) ?? [], sealedFor: keyring.sealedFor, of: rowID,
                at: EpochMilliseconds.now())
            if added, let guarded { throw Self.newCredential("a notification-key keyring", of: guarded) }
        }
        guard try await driver.keyringCount(of: rowID) <= Self.keyringsPerProject else {
            throw ArchiveProblem(
                "project \(record.projectId) would have more than \(Self.keyringsPerProject) keyrings: each registry it came through adds one"
            )
        }
    }

    private static func newCredential(_ what: String, of projectId: String) -> ArchiveProblem {
        ArchiveProblem(
            "project \(projectId) was already here, and the file would add \(what) to it: import with --merge-credentials if the file is trusted to"
        )
    }

    /// A server key is added, or revoked when the file has it revoked; never un-revoked.
    private func take(_ key: ServerKeyArchive, of project: Int64, guarding guarded: String?) async throws {
        let hash = Base64URL.decode(key.sha256) ?? []
        let revokedAt = key.revokedAt.map(EpochMilliseconds.milliseconds)
        guard let row = try await driver.serverKey(hash) else {
            if let guarded, revokedAt == nil { throw Self.newCredential("a server key", of: guarded) }
            // A key keeps its scopes: a `read` key never comes back as an `admin` one.
            let scopes: KeyScopes
            do { scopes = try key.scopes.map { try KeyScopes(names: $0) } ?? .all } catch {
                throw ArchiveProblem("a server key's scopes are not send, subscribe, read or admin")
            }
            try await driver.insertServerKey(
                hash, createdAt: EpochMilliseconds.milliseconds(key.createdAt), revokedAt: revokedAt,
                name: String((key.name ?? "").prefix(RegistryService.maximumKeyNameLength)), scopes: scopes.rawValue,
                of: project)
            return
        }
        guard row.project == project else {
            throw ArchiveProblem("a server key of this project is another project's here")
        }
        if let revokedAt, row.revokedAt == nil { try await driver.revokeServerKey(hash, at: revokedAt) }
    }

    /// A service account is added, or revoked when the file has it revoked; never un-revoked.
    private func take(_ account: ServiceAccountArchive, of project: Int64, guarding guarded: String?) async throws {
        let revokedAt = account.revokedAt.map(EpochMilliseconds.milliseconds)
        guard let row = try await driver.serviceAccount(account.keyId) else {
            if let guarded, revokedAt == nil {
                throw Self.newCredential("service account \(account.keyId)", of: guarded)
            }
            try await driver.insertServiceAccount(account, revokedAt: revokedAt, of: project)
            return
        }
        guard row.project == project else {
            throw ArchiveProblem("service account \(account.keyId) is another project's here")
        }
        if let revokedAt, row.revokedAt == nil { try await driver.revokeServiceAccount(account.keyId, at: revokedAt) }
    }

    /// The row id of a project the file declared earlier or the database already has.
    func projectRowID(_ projectId: String) async throws -> Int64 {
        if let known = projects[projectId] { return known.rowID }
        guard let (rowID, _) = try await driver.project(projectId) else {
            throw ArchiveProblem("no project \(projectId): its project record must come first")
        }
        projects[projectId] = (rowID, NotificationKeyring(secret: ownSecret, sealedFor: rowID).fingerprint)
        return rowID
    }

    /// The row id of a keyring the project's record brought; `nil` for the database's own.
    func keyringRowID(_ fingerprint: String, in project: Int64, projectId: String) async throws -> Int64? {
        if let known = keyrings[project]?[fingerprint] { return known }
        if fingerprint == projects[projectId]?.ownKeyring { return nil }
        guard let id = try await driver.keyring(fingerprint, of: project) else {
            throw ArchiveProblem("keyring \(fingerprint) is not one of project \(projectId)'s (its record lists them)")
        }
        keyrings[project, default: [:]][fingerprint] = id
        return id
    }
}
