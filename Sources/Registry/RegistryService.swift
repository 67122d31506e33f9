import Audience
import Crypto
import Conditions

/// The registry's operations, as every front end (HTTP, XMPP, command line) calls them: input is
/// validated here, keys are issued and read here, and the store does the rest in one transaction.
public struct RegistryService: Sendable {
    public let store: any RegistryStore
    public let limits: Limits
    let keys: NotificationKeyCodec
    let serverKeys = ServerKeyCache()
    /// Who is subscribed to what, kept equal to the tables by following the change feed.
    public let audience = AudienceIndex()
    /// Where accepted messages go: today the message log, later the relay to FCM.
    public let sink: any MessageSink
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
    ///   - checkpoint: a file to load the index from at start (then the feed is replayed from
    ///     its position) and to save it to with `saveCheckpoint`; see `AudienceCheckpoint`.
    public init(
        store: any RegistryStore, limits: Limits = Limits(), sink: (any MessageSink)? = nil, checkpoint: String? = nil
    ) async throws {
        self.store = store
        self.limits = limits
        self.sink = sink ?? StoreMessageLog(store: store, limits: limits)
        checkpointPath = checkpoint
        let secret = try await store.secret(named: "notificationKey", orCreate: NotificationKeyCodec.makeSecret)
        keys = NotificationKeyCodec(secret: secret)
        databaseID = try await store.secret(named: "databaseID") { (0..<16).map { _ in UInt8.random(in: 0...255) } }
        accessTokens = AccessTokenCodec(
            secret: try await store.secret(named: "accessToken") {
                SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }
            })
    }

    // MARK: - Start-up and checkpoints

    /// Fills the audience index (from the checkpoint when it can be trusted, else from the tables)
    /// and keeps it current with this process's writes from then on.
    /// - Returns: where the index came from and how long it took, for the start-up log line.
    @discardableResult
    public func startAudience() async throws -> AudienceStartup {
        let startup = try await Self.startAudience(
            audience, store: store, checkpoint: checkpointPath, databaseID: databaseID)
        store.attach(audience)
        return startup
    }

    /// Loads `index` from the checkpoint when it can be trusted, then replays the feed after its
    /// position; otherwise from the tables.
    private static func startAudience(
        _ index: AudienceIndex, store: any RegistryStore, checkpoint: String?, databaseID: [UInt8]
    ) async throws -> AudienceStartup {
        let started = ContinuousClock.now
        var reason: String?
        if let checkpoint {
            do {
                let state = try await CostlyWork.runInBackground {
                    try AudienceCheckpoint.decode(AudienceCheckpoint.read(from: checkpoint), databaseID: databaseID)
                }
                guard try await !store.feed(after: state.position, limit: 1).truncated else {
                    throw AudienceCheckpoint.Problem.stale(position: state.position)
                }
                index.restore(state)
                var replayed = 0
                while true {
                    let read = try await store.feed(after: index.position, limit: 10_000)
                    index.apply(read)
                    replayed += read.entries.count
                    if read.entries.count < 10_000 || index.isStale { break }
                }
                if !index.isStale {
                    return AudienceStartup(
                        source: .checkpoint(position: state.position, replayed: replayed),
                        duration: ContinuousClock.now - started)
                }
                reason = "the feed asked for a reload while replaying"
            } catch {
                reason = "\(error)"
            }
        }
        index.load(try await store.loadAudience())
        return AudienceStartup(source: .tables(reason: reason), duration: ContinuousClock.now - started)
    }

    /// Saves the audience index to the checkpoint file, off the request threads.
    /// - Returns: the bytes written and the feed position saved, or `nil` without a checkpoint path.
    @discardableResult
    public func saveCheckpoint() async throws -> (bytes: Int, position: Int64)? {
        guard let checkpointPath else { return nil }
        let state = audience.copyState()
        let databaseID = databaseID
        let size = try await CostlyWork.runInBackground {
            let bytes = AudienceCheckpoint.encode(state, databaseID: databaseID)
            try AudienceCheckpoint.write(bytes, to: checkpointPath)
            return bytes.count
        }
        return (size, state.position)
    }

    // MARK: - Following the feed

    /// Replaces the audience index with what the tables hold now.
    public func reloadAudience() async throws {
        audience.load(try await store.loadAudience())
    }

    /// Applies what other processes committed since the index's position; reloads when the index
    /// missed entries (it fell behind the feed's retention, or a bulk writer asked for it).
    /// - Returns: the number of entries applied, or `nil` when the index was reloaded.
    @discardableResult
    public func catchUp(batch: Int = 10_000) async throws -> Int? {
        if audience.isStale {
            try await reloadAudience()
            return nil
        }
        var applied = 0
        while true {
            let read = try await store.feed(after: audience.position, limit: batch)
            audience.apply(read)
            if audience.isStale {
                try await reloadAudience()
                return nil
            }
            applied += read.entries.count
            if read.entries.count < batch { return applied }
        }
    }

    /// Committed feed entries this process's index has not applied yet.
    public func feedLag() async throws -> Int64 {
        max(0, try await store.feedHead() - audience.position)
    }

    /// What following the feed reports beyond the ordinary.
    public enum FeedEvent: Sendable {
        /// The index missed entries and was loaded again from the tables.
        case reloaded(Duration)
        /// A round failed; the next one tries again.
        case failed(any Error)
    }

    /// Follows the feed until the task is cancelled, catching up every `interval`.
    public func followFeed(every interval: Duration, report: @Sendable (FeedEvent) -> Void = { _ in }) async {
        while !Task.isCancelled {
            let started = ContinuousClock.now
            do {
                if try await catchUp() == nil { report(.reloaded(ContinuousClock.now - started)) }
            } catch {
                // Stopping cancels a read in flight: that is the end of following, not a failure.
                if Task.isCancelled || error is CancellationError { return }
                report(.failed(error))
            }
            try? await Task.sleep(for: interval)
        }
    }

    // MARK: - Projects

    /// Creates a project with a first server key; returns both (the key is shown only now).
    public func createProject(projectId: String, senderId: String) async throws -> (Project, serverKey: String) {
        try Project.validate(projectId: projectId, senderId: senderId)
        let key = ServerKey.generate()
        let project = try await store.createProject(
            projectId: projectId, senderId: senderId, keyHash: ServerKey.hash(key))
        return (project, key)
    }

    /// Adds another server key to a project (for rotation); returns the new key.
    public func addServerKey(toProject projectId: String) async throws -> (Project, serverKey: String) {
        let key = ServerKey.generate()
        let project = try await store.addServerKey(keyHash: ServerKey.hash(key), toProject: projectId)
        return (project, key)
    }

    public func revokeServerKey(_ key: String) async throws {
        let hash = ServerKey.hash(key)
        try await store.revokeServerKey(keyHash: hash)
        serverKeys.forget(hash)
    }

    /// The project a server key opens, or `nil` for an unknown or revoked key.
    /// Answers are cached for a second (see `ServerKeyCache`).
    public func project(authenticatedBy key: String) async throws -> Project? {
        let hash = ServerKey.hash(key)
        if let cached = serverKeys.lookUp(hash) { return cached }
        let project = try await store.project(authenticatedBy: hash)
        serverKeys.store(project, for: hash)
        return project
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
