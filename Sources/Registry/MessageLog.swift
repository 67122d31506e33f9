import Foundation

/// A message in the log, as the listings show it.
public struct LoggedMessage: Sendable {
    public var id: String
    public var via: MessageProtocol
    /// The target as the sender wrote it (`/topics/news`, a condition, a token, …).
    public var target: String
    /// The normalized message, as JSON (never the raw request body).
    public var body: String
    public var receivedAt: Date
    public var recipientCount: Int

    public init(id: String, via: MessageProtocol, target: String, body: String, receivedAt: Date, recipientCount: Int) {
        self.id = id
        self.via = via
        self.target = target
        self.body = body
        self.receivedAt = receivedAt
        self.recipientCount = recipientCount
    }
}

/// Which of a project's logged messages a listing wants.
public enum MessageFilter: Sendable, Hashable {
    case all
    /// Those that reached the token with this id.
    case reaching(UInt32)
}

/// The emulator's sink: accepted messages and whom they reached, kept per project in the
/// database, so that a test suite can ask what a device would have received, from any server
/// process and after a restart.
///
/// Each project's log is bounded in entries and in bytes (`Limits.messageLogEntries`,
/// `Limits.messageLogBytes`); the oldest entries go first. An entry costs its normalized JSON
/// plus its recipient set, compressed.
public struct StoreMessageLog: MessageSink {
    let log: any MessageLogStore
    let limits: Limits

    public init(log: any MessageLogStore, limits: Limits) {
        self.log = log
        self.limits = limits
    }

    public func relays(_ project: Project) async throws -> Bool { false }

    public func accept(_ message: AcceptedMessage) async throws -> DirectOutcomes {
        try await log.appendMessage(
            message, body: Self.normalizedJSON(message.message), entries: limits.messageLogEntries,
            bytes: limits.messageLogBytes)
        return .none
    }

    /// The message as stored and listed: sorted keys, so equal messages read the same.
    public static func normalizedJSON(_ message: Message) -> String {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return (try? encoder.encode(message)).map { String(decoding: $0, as: UTF8.self) } ?? "{}"
    }
}

extension RegistryService {
    /// A page of the project's logged messages, newest first, bounded by `limit` entries and by
    /// `Limits.messageLogPageBytes` of message bodies (at least one entry per page).
    public func loggedMessages(_ filter: MessageFilter, in project: Project, after: String?, limit: Int) async throws
        -> Page<LoggedMessage>
    {
        try await messageLog.messages(
            filter, in: project, before: after.flatMap(Int64.init), limit: min(max(limit, 1), limits.maximumPageSize),
            bytes: limits.messageLogPageBytes)
    }

    /// The logged message with this id.
    /// - Throws: `.messageNotFound` when the log does not hold it.
    public func loggedMessage(_ id: String, in project: Project) async throws -> LoggedMessage {
        guard id.utf8.count <= 256, let message = try await messageLog.message(id, in: project) else {
            throw RegistryError.messageNotFound
        }
        return message
    }

    /// The project's logged messages that reached `token`: none when the project does not know it.
    public func loggedMessages(to token: String, in project: Project, after: String?, limit: Int) async throws
        -> Page<LoggedMessage>
    {
        try checkToken(token)
        guard let id = try await store.tokenIDs([token], in: project)[token] else {
            return Page(items: [], nextAfter: nil)
        }
        return try await loggedMessages(.reaching(id), in: project, after: after, limit: limit)
    }
}
