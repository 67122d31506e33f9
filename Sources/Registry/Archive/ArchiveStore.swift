/// How a backend writes a registry out and reads one in, for `export` and `import`.
public protocol ArchiveStore: Sendable {
    /// Hands every record of the registry (or of one project) to `emit`, in the order
    /// ``ArchiveRecord`` describes, from one consistent read: what a running server writes
    /// meanwhile is either wholly in it or not at all. Streams: memory stays constant.
    /// - Parameter secret: the database's own notification-key secret, exported as each project's
    ///   first keyring.
    func export(project: String?, ownSecret secret: [UInt8], to emit: @escaping @Sendable (ArchiveRecord) throws -> Void)
        async throws

    /// Writes a batch of validated records as one transaction: all of it or, on the first record
    /// it cannot take, nothing (then it throws `ImportError` with that record's line). Running it
    /// again changes nothing: every record is matched with what is already there by its natural
    /// key (project id, topic name, token, group name).
    /// - Parameters:
    ///   - ownSecret: the database's notification-key secret: a keyring equal to it is not
    ///     stored again (a registry imported back into the database it came from).
    ///   - mergingCredentials: whether the file may add server keys, service accounts or
    ///     keyrings to a project the database already has. Without it, that is refused: project
    ///     ids are no secret, and a file must not be a way to log in to someone's project.
    ///   - rollingBack: take every record, then roll the transaction back by throwing
    ///     `CheckedBatch` with the tally (see `checkBatch`).
    func importBatch(
        _ records: [NumberedRecord], limits: Limits, ownSecret: [UInt8], mergingCredentials: Bool, rollingBack: Bool
    ) async throws -> Committed<ImportTally>

    /// Deletes the topics an import left without subscribers (a topic record whose tokens did not
    /// follow): a topic exists while it has subscribers.
    func finishImport() async throws

    /// How many records ``export(project:ownSecret:to:)`` would emit now: the total a progress
    /// line shows (a server writing meanwhile may make the export a little longer or shorter).
    func exportSize(project: String?) async throws -> Int
}

extension ArchiveStore {
    /// Writes a batch (``importBatch(_:limits:ownSecret:mergingCredentials:rollingBack:)``).
    public func importBatch(_ records: [NumberedRecord], limits: Limits, ownSecret: [UInt8], mergingCredentials: Bool)
        async throws -> Committed<ImportTally>
    {
        try await importBatch(
            records, limits: limits, ownSecret: ownSecret, mergingCredentials: mergingCredentials, rollingBack: false)
    }

    /// Checks a batch exactly as `importBatch` writes it, in a transaction that is then rolled
    /// back: the same `ImportError` for the same line, and nothing written (`import-groups --check`).
    /// - Returns: what the batch would have added.
    public func checkBatch(_ records: [NumberedRecord], limits: Limits, ownSecret: [UInt8], mergingCredentials: Bool)
        async throws -> ImportTally
    {
        do {
            _ = try await importBatch(
                records, limits: limits, ownSecret: ownSecret, mergingCredentials: mergingCredentials, rollingBack: true)
        } catch let checked as CheckedBatch {
            return checked.tally
        }
        return ImportTally()
    }
}

/// What a store throws from inside a batch it checks, so that the transaction is rolled back;
/// `checkBatch` catches it again and returns the tally.
public struct CheckedBatch: Error, Sendable {
    public var tally: ImportTally

    public init(tally: ImportTally) {
        self.tally = tally
    }
}

/// What an import wrote: how many records of each kind were new, the rest being already there.
public struct ImportTally: Sendable, Hashable, Codable {
    public var projects = 0
    public var topics = 0
    public var tokens = 0
    public var subscriptions = 0
    public var groups = 0
    public var members = 0
    public var notificationKeys = 0

    public init() {}

    public static func + (left: ImportTally, right: ImportTally) -> ImportTally {
        var sum = left
        sum.projects += right.projects
        sum.topics += right.topics
        sum.tokens += right.tokens
        sum.subscriptions += right.subscriptions
        sum.groups += right.groups
        sum.members += right.members
        sum.notificationKeys += right.notificationKeys
        return sum
    }
}
