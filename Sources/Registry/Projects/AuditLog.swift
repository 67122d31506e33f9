import Foundation

/// What the audit log records: the one vocabulary of actions, written as `noun.verb`, which
/// `docs/http-api.md` lists. Every change made through an `admin`-scope route or the console, and
/// every key event (the command line's too), is one of these; token registration, subscriptions
/// and sends are the traffic, counted in `stats`, never audited.
public enum AuditAction: String, Sendable, CaseIterable, Codable {
    /// A server key made (`POST /api/keys`, `project add-key`, the first key of `project create` or
    /// of `serve` on a new database).
    case keyCreated = "key.created"
    /// A server key revoked at once (`DELETE /api/keys/{id}`, `project revoke-key`).
    case keyRevoked = "key.revoked"
    /// A server key replaced by a new one; details name the new key's id and the grace period.
    case keyRotated = "key.rotated"
    case webhookCreated = "webhook.created"
    case webhookDeleted = "webhook.deleted"
    /// A webhook's signing secret replaced (the secret itself is never recorded).
    case webhookSecretRotated = "webhook.secretRotated"
    case webhookEnabled = "webhook.enabled"
    /// "Retry now": a webhook's waiting events made due.
    case webhookRetried = "webhook.retried"
    /// `DELETE /api/tokens/{token}`.
    case tokenUnregistered = "token.unregistered"
    /// A fault injected on one token or on the whole project (target `*`).
    case faultInjected = "fault.injected"
    case faultCleared = "fault.cleared"
    /// `POST /api/messages/{id}:cancel`.
    case messageCancelled = "message.cancelled"
    /// `POST /api/xmpp/connections:drain`.
    case xmppDrained = "xmpp.drained"
    /// Delivery turned on, or its settings changed (`project relay`); details name the channel and
    /// its settings that may be shown, never its secrets.
    case relayEnabled = "relay.enabled"
    /// Delivery turned off (`project relay --off`): what was pending failed with `RELAY_OFF`.
    case relayDisabled = "relay.disabled"
    /// The mirror of Google's device groups turned on or its settings changed (`project mirror`).
    case mirrorEnabled = "mirror.enabled"
    /// The mirror turned off (`project mirror --off`).
    case mirrorDisabled = "mirror.disabled"
    /// The project's token policy changed (`PATCH /api/project`, `project tokens`); details hold
    /// the policy as it is now.
    case tokenPolicyChanged = "tokenPolicy.changed"
    /// A round of the expiry sweep unregistered tokens not seen for `expireAfter`; details hold
    /// how many. One entry per round, never one per token.
    case tokensExpired = "tokens.expired"
}

/// Who made a change: the key (or access token) and the client it said it was.
public struct AuditActor: Sendable, Hashable {
    /// `nil` for a service account's access token and for the command line.
    public var keyID: Int64?
    /// The key's name; a service account's client email; empty for an unnamed key.
    public var keyName: String
    /// `X-Registry-Client` as sent (bounded and sanitized, see `client(from:)`), `api` without it,
    /// `cli` for the command line.
    public var client: String

    public init(keyID: Int64?, keyName: String, client: String) {
        (self.keyID, self.keyName, self.client) = (keyID, keyName, client)
    }

    /// The command line, run on the database's machine: no key.
    public static let commandLine = AuditActor(keyID: nil, keyName: "", client: "cli")

    /// The server itself, on its own schedule (the expiry sweep): no key.
    public static let server = AuditActor(keyID: nil, keyName: "", client: "server")

    /// The longest client name kept, in characters.
    public static let maximumClientLength = 64

    /// A client's name as the audit log keeps it: letters, digits and `.-_/ :@+` only (anything else
    /// becomes `_`), at most ``maximumClientLength`` characters; `api` when absent or empty.
    public static func client(from header: String?) -> String {
        guard let header, !header.isEmpty else { return "api" }
        let allowed = Set(".-_/ :@+".unicodeScalars)
        let kept = header.unicodeScalars.prefix(maximumClientLength).map { scalar -> Character in
            scalar.isASCII
                && (scalar.properties.isAlphabetic || ("0"..."9").contains(scalar) || allowed.contains(scalar))
                ? Character(scalar) : "_"
        }
        return String(kept)
    }
}

/// One entry of the audit log, as `GET /api/audit` shows it. Never a secret: no key values, no
/// private keys, no webhook secrets, no URL credentials or query strings.
public struct AuditEntry: Sendable, Hashable {
    /// The row id (0 before it is stored): newest first is highest first.
    public var id: Int64
    /// The project's row id.
    public var project: Int64
    public var at: Date
    public var keyID: Int64?
    public var keyName: String
    public var client: String
    /// An ``AuditAction``'s raw value.
    public var action: String
    /// What was changed: a key's id, a webhook's id, a token, a message id, `*` for the project.
    public var target: String
    /// A few facts of the change, as strings.
    public var details: [String: String]

    public init(
        id: Int64 = 0, project: Int64, at: Date, keyID: Int64?, keyName: String, client: String, action: String,
        target: String, details: [String: String] = [:]
    ) {
        (self.id, self.project, self.at, self.keyID, self.keyName) = (id, project, at, keyID, keyName)
        (self.client, self.action, self.target, self.details) = (client, action, target, details)
    }

    /// `details` as the stores keep it: a JSON object, keys sorted.
    public var detailsJSON: String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(details)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }

    /// `details` back from the stores' JSON text (anything else reads as none).
    public static func details(fromJSON text: String) -> [String: String] {
        (try? JSONDecoder().decode([String: String].self, from: Data(text.utf8))) ?? [:]
    }
}

/// An entry to write in a change's own transaction, and the age past which the store sweeps a few
/// old entries while it is there (as the idempotency keys are swept).
public struct AuditWrite: Sendable, Hashable {
    public var entry: AuditEntry
    /// Entries older than this (epoch milliseconds) may be deleted.
    public var sweepBefore: Int64

    /// Entries swept by one write, at most: the log never grows faster than it is swept.
    public static let sweepBatch = 16

    public init(entry: AuditEntry, sweepBefore: Int64) {
        (self.entry, self.sweepBefore) = (entry, sweepBefore)
    }
}

/// What a store does for the audit log: the statements only. Changes write their entry inside
/// their own transaction (the store methods that take an `AuditWrite`); this adds one alone (a
/// change that lives in memory only, such as a fault) and reads them.
public protocol AuditStore: Sendable {
    /// Inserts the entry and sweeps up to `AuditWrite.sweepBatch` entries older than `sweepBefore`,
    /// in one transaction.
    func appendAudit(_ write: AuditWrite) async throws
    /// The project's entries newest first: of one action when given, at or after `since` (epoch
    /// milliseconds), with an id below `before` when given; at most `limit`.
    func auditEntries(of project: Int64, action: String?, since: Int64, before: Int64?, limit: Int) async throws
        -> [AuditEntry]
}

// MARK: - The rules

extension RegistryService {
    /// The entry `actor` writes for `action` on `target` now; `nil` without an actor (a change the
    /// registry makes itself, such as a token FCM said is gone, is not audited).
    func audit(
        _ action: AuditAction, target: String, details: [String: String] = [:], by actor: AuditActor?,
        project: Int64, now: Date = Date()
    ) -> AuditWrite? {
        guard let actor else { return nil }
        let entry = AuditEntry(
            project: project, at: now, keyID: actor.keyID, keyName: actor.keyName, client: actor.client,
            action: action.rawValue, target: target, details: details)
        return AuditWrite(entry: entry, sweepBefore: Self.auditCutoff(now: now, retention: limits.auditRetention))
    }

    /// Entries older than this are past the retention (epoch milliseconds).
    static func auditCutoff(now: Date, retention: Duration) -> Int64 {
        EpochMilliseconds.milliseconds(now) - EpochMilliseconds.milliseconds(retention)
    }

    /// A change that lives in this process only (a fault): its entry written alone.
    func recordAudit(_ write: AuditWrite?) async throws {
        guard let write else { return }
        try await auditLog.appendAudit(write)
    }

    /// The project's audit log, newest first, within the retention.
    /// - Parameters:
    ///   - action: only this action's entries (one of ``AuditAction``).
    ///   - since: only entries at or after it.
    /// - Throws: `.invalidPageToken`.
    public func auditEntries(
        in project: Project, action: AuditAction?, since: Date?, page: PageRequest, now: Date = Date()
    ) async throws -> Page<AuditEntry> {
        var before: Int64?
        if let position = try page.position(in: .audit) {
            guard let id = Int64(position), id > 0 else { throw RegistryError.invalidPageToken }
            before = id
        }
        let limit = page.size(default: 100, maximum: 1000)
        let cutoff = Self.auditCutoff(now: now, retention: limits.auditRetention)
        let from = max(cutoff, since.map(EpochMilliseconds.milliseconds) ?? cutoff)
        var entries = try await auditLog.auditEntries(
            of: project.rowID, action: action?.rawValue, since: from, before: before, limit: limit + 1)
        let more = entries.count > limit
        if more { entries.removeLast(entries.count - limit) }
        return Page(items: entries, nextAfter: more ? entries.last.map { String($0.id) } : nil)
    }

    /// Injects a fault (as `injectFault(_:token:in:)`) and records `fault.injected`: the fault lives
    /// in this process only, so its entry is written alone, after it.
    public func injectFault(_ fault: InjectedFault, token: String?, in project: Project, by actor: AuditActor?)
        async throws
    {
        try injectFault(fault, token: token, in: project)
        var details = ["error": fault.kind.rawValue]
        details["times"] = fault.remaining.map(String.init)
        try await recordAudit(
            audit(.faultInjected, target: token ?? "*", details: details, by: actor, project: project.rowID))
    }

    /// Removes a fault (as `removeFault(token:in:)`) and records `fault.cleared` when there was one.
    public func removeFault(token: String?, in project: Project, by actor: AuditActor?) async throws -> Bool {
        guard try removeFault(token: token, in: project) else { return false }
        try await recordAudit(audit(.faultCleared, target: token ?? "*", by: actor, project: project.rowID))
        return true
    }

    /// Records `xmpp.drained` for the connections a drain reached (`connection`: the one asked for,
    /// `nil` for all): sessions live in a server's memory, so the entry is written alone, after.
    public func recordDrain(_ drained: [String], connection: String?, in project: Project, by actor: AuditActor?)
        async throws
    {
        try await recordAudit(
            audit(
                .xmppDrained, target: connection ?? "*", details: ["connections": drained.joined(separator: " ")],
                by: actor, project: project.rowID))
    }

    /// A webhook URL as the audit log keeps it: without credentials, query or fragment, which may
    /// carry a receiver's secret.
    static func auditedURL(_ url: String) -> String {
        guard var parts = URLComponents(string: url) else { return "" }
        (parts.user, parts.password, parts.query, parts.fragment) = (nil, nil, nil, nil)
        return parts.string ?? ""
    }
}

/// The changes written without an audit entry: the stores' own tests.
extension RegistryStore {
    public func createProject(projectId: String, senderId: String, keyHash: [UInt8]) async throws -> Project {
        try await createProject(projectId: projectId, senderId: senderId, keyHash: keyHash, audit: nil)
    }

    public func unregisterToken(_ token: String, in project: Project) async throws -> Committed<TokenInfo?> {
        try await unregisterToken(token, in: project, audit: nil)
    }
}

extension OutboxStore {
    public func cancel(message id: String, in project: Project, now: Date) async throws -> DeliveryCounts? {
        try await cancel(message: id, in: project, now: now, audit: nil)
    }
}
