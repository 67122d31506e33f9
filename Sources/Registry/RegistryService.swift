import AudienceEngine
import Conditions
import Crypto

/// The registry's operations, as every front end (HTTP, XMPP, command line) calls them: input is
/// validated here, keys are issued and read here, and the store does the rest in one transaction.
public struct RegistryService: Sendable {
    /// The storage seams: writes go through the service, which applies what they committed to
    /// the audience index, never to the store directly.
    package let store: any RegistryStore
    /// The change feed the audience index follows.
    package let feed: any ChangeFeed
    package let messageLog: any MessageLogStore
    package let archive: any ArchiveStore
    /// The relay's settings and durable work.
    package let outbox: any OutboxStore
    /// Each project's rate toward FCM, and the budget all servers take their sends from.
    package let sendBudget: any SendBudgetStore
    /// Upstream messages and receipts on their way to an XMPP session on any server; front ends
    /// reach them through `RegistryService+Upstream`.
    package let upstream: any UpstreamStore
    /// Each project's webhooks and the queue of their events.
    package let webhooks: any WebhookStore
    /// Which webhook URLs may be registered (`--webhook-allow-private-networks`).
    public let webhookPolicy: WebhookURLPolicy
    /// The sends' `Idempotency-Key`s and their answers (`Idempotency.swift`).
    package let idempotency: any IdempotencyStore
    /// Who changed what, when (`AuditLog.swift`).
    package let auditLog: any AuditStore
    public let limits: Limits
    let keys: NotificationKeyCodec
    let serverKeys = ServerKeyCache()
    /// Each key's last use, written at most once a minute per key (`RegistryService+ServerKeys`).
    let keyUses = KeyUseMinutes()
    /// The errors the emulator answers on purpose (`injectFault`).
    let faults = FaultBoard()
    /// The topics whose subscription calls the emulator refuses on purpose (`injectTopicFault`).
    let topicFaults = TopicFaultBoard()
    /// Who is subscribed to what, kept equal to the tables by following the change feed.
    public let audience = AudienceIndex()
    /// How far behind the feed the audience index is: what readiness and metrics report.
    public let feedHealth = FeedHealth()
    /// Where accepted messages go: today the message log, later the relay to FCM.
    public let sink: any MessageSink
    /// Google's device-group API, for the projects that mirror it (`project mirror`); `nil`
    /// where nothing can reach Google (commands, tests).
    let mirror: (any GroupMirror)?
    /// Whether each project mirrors, read at most once a second (`ProjectSettingCache`).
    let mirrorSettingsCache = ProjectSettingCache<ChannelSettings?>()
    /// Each project's token policy, read at most once a second (`ProjectSettingCache`).
    let tokenPolicyCache = ProjectSettingCache<TokenPolicy>()
    /// Where the audience index is saved between runs; `nil` for none.
    public let checkpointPath: String?
    /// Tells a checkpoint of this database from one of another.
    let databaseID: [UInt8]
    /// Issues and reads the access tokens of the OAuth 2.0 token endpoint.
    let accessTokens: AccessTokenCodec

    /// Opens the registry over `store`, reading (and on first use creating) its secrets. The
    /// audience index starts empty: ``startAudience()`` fills it, as a start-up step of its own,
    /// for the server and the commands that need it (the others look at a few rows and need not
    /// spend the seconds it takes on a large registry).
    /// - Parameters:
    ///   - sink: where accepted messages go; the store's message log unless said otherwise.
    ///   - mirror: how to reach Google for the projects that mirror its device groups.
    ///   - checkpoint: a file to load the index from at start (then the feed is replayed after
    ///     its cursor) and to save it to with `saveCheckpoint`; see `AudienceCheckpoint`.
    public init(
        store: any RegistryBackend, limits: Limits = Limits(), sink: (any MessageSink)? = nil,
        checkpoint: String? = nil, mirror: (any GroupMirror)? = nil, webhookPolicy: WebhookURLPolicy = WebhookURLPolicy()
    ) async throws {
        self.mirror = mirror
        self.store = store
        feed = store
        messageLog = store
        archive = store
        outbox = store
        sendBudget = store
        upstream = store
        webhooks = store
        self.webhookPolicy = webhookPolicy
        idempotency = store
        auditLog = store
        self.limits = limits
        self.sink = sink ?? StoreMessageLog(log: store, limits: limits)
        checkpointPath = checkpoint
        let secret = try await store.secret(named: "notificationKey", orCreate: NotificationKeyCodec.makeSecret)
        keys = NotificationKeyCodec(secret: secret)
        databaseID = try await store.secret(named: "databaseID") { (0..<16).map { _ in UInt8.random(in: 0...255) } }
        accessTokens = AccessTokenCodec(
            secret: try await store.secret(named: "accessToken") {
                SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }
            })
    }

    /// A committed write's value, once its changes are in this process's audience index.
    func applied<T>(_ committed: Committed<T>) -> T {
        audience.applyOwn(committed.changes, idsFollowCommitOrder: feed.idsFollowCommitOrder)
        return committed.value
    }

    // MARK: - Start-up and checkpoints

    /// Fills the audience index: from the checkpoint when it can be trusted (then the feed is
    /// replayed after its cursor), else from the tables.
    /// - Returns: where the index came from and how long it took, for the start-up log line.
    @discardableResult
    public func startAudience() async throws -> AudienceStartup {
        let started = ContinuousClock.now
        var reason: String?
        if let checkpointPath {
            do {
                let (position, replayed) = try await startFromCheckpoint(checkpointPath)
                return AudienceStartup(
                    source: .checkpoint(position: position, replayed: replayed), duration: ContinuousClock.now - started)
            } catch {
                reason = "\(error)"
            }
        }
        audience.load(try await feed.loadAudience())
        return AudienceStartup(source: .tables(reason: reason), duration: ContinuousClock.now - started)
    }

    /// Restores the index from the checkpoint and replays the feed after it.
    /// - Returns: the checkpoint's feed position, and the number of changes replayed.
    /// - Throws: `AudienceCheckpoint.Problem` when the checkpoint cannot be trusted.
    private func startFromCheckpoint(_ path: String) async throws -> (position: Int64, replayed: Int) {
        let databaseID = databaseID
        let contents = try await CostlyWork.runInBackground {
            try AudienceCheckpoint.decode(AudienceCheckpoint.read(from: path), databaseID: databaseID)
        }
        let cursor = contents.state.cursor
        // A restored backup has a feed that ends before the checkpoint, or (once written to
        // again) one whose entry at the checkpoint's cursor is another: either way, the index
        // the checkpoint holds is not this database's.
        let head = try await feed.head()
        guard head.watermark >= cursor.watermark else {
            throw AudienceCheckpoint.Problem.ahead(position: cursor.watermark, head: head.watermark)
        }
        guard try await !feed.changes(after: cursor, limit: 1).truncated else {
            throw AudienceCheckpoint.Problem.stale(position: cursor.watermark)
        }
        let fingerprint = try await feed.fingerprint(at: cursor) ?? Self.noFingerprint
        guard fingerprint == contents.fingerprint else {
            throw AudienceCheckpoint.Problem.otherCopy(position: cursor.watermark)
        }
        audience.restore(contents.state)
        var replayed = 0
        while true {
            let cursor = audience.cursor
            let read = try await feed.changes(after: cursor, limit: 10_000)
            audience.apply(read, after: cursor)
            replayed += read.entries.count
            if read.entries.count < 10_000 || audience.isStale { break }
        }
        guard !audience.isStale else {
            throw AudienceCheckpoint.Problem.damaged("the feed asked for a reload while replaying")
        }
        return (cursor.watermark, replayed)
    }

    /// What a checkpoint holds for a cursor with no entry at it (an empty feed).
    static let noFingerprint = [UInt8](repeating: 0, count: AudienceCheckpoint.fingerprintSize)

    /// Saves the audience index to the checkpoint file, off the request threads.
    /// - Returns: the bytes written and the feed position saved; `nil` without a checkpoint path,
    ///   or while the index must be reloaded.
    @discardableResult
    public func saveCheckpoint() async throws -> (bytes: Int, position: Int64)? {
        guard let checkpointPath else { return nil }
        let state = audience.copyState()
        // An index that missed changes (a bulk write's reset, a reload under way or cut short by
        // shutdown) is not saved: the next start would trust it.
        guard !state.stale else { return nil }
        let fingerprint = try await feed.fingerprint(at: state.cursor) ?? Self.noFingerprint
        let databaseID = databaseID
        let size = try await CostlyWork.runInBackground {
            let bytes = AudienceCheckpoint.encode(.init(state: state, fingerprint: fingerprint), databaseID: databaseID)
            try AudienceCheckpoint.write(bytes, to: checkpointPath)
            return bytes.count
        }
        return (size, state.cursor.watermark)
    }

    // MARK: - Projects

    /// Creates a project with a first server key; returns both (the key is shown only now).
    public func createProject(projectId: String, senderId: String) async throws -> (Project, serverKey: String) {
        try Project.validate(projectId: projectId, senderId: senderId)
        let key = ServerKey.generate()
        // Made on the database's machine (`project create`, or `serve` on a new database).
        let project = try await store.createProject(
            projectId: projectId, senderId: senderId, keyHash: ServerKey.hash(key)
        ) { project, record, _ in
            audit(
                .keyCreated, target: String(record.id), details: Self.keyDetails(record), by: .commandLine,
                project: project)
        }
        return (project, key)
    }

    // MARK: - Shared checks

    /// Well-formed tokens in first-seen order without repeats; malformed ones are dropped, as FCM does.
    func usableTokens(_ tokens: [String]) -> [String] {
        var seen = Set<String>()
        return tokens.filter { RegistrationToken.isWellFormed($0) && seen.insert($0).inserted }
    }

    func checkTopicName(_ topic: String) throws(RegistryError) {
        guard TopicName.isValid(topic) else { throw .invalidTopicName }
    }

    func checkToken(_ token: String) throws(RegistryError) {
        guard RegistrationToken.isWellFormed(token) else { throw .malformedToken }
    }

    func pageSize(_ requested: Int?) -> Int {
        guard let requested, requested > 0 else { return limits.defaultPageSize }
        return min(requested, limits.maximumPageSize)
    }
}

/// How the audience index came to be at start, for the start-up log line.
public struct AudienceStartup: Sendable {
    public enum Source: Sendable {
        /// From the checkpoint at `position`, then `replayed` feed entries.
        case checkpoint(position: Int64, replayed: Int)
        /// From the tables; `reason` says why the checkpoint was not used, if there was one.
        case tables(reason: String?)
    }

    public var source: Source
    public var duration: Duration
}
