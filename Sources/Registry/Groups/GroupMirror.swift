/// Google's device-group API, as `project mirror` reaches it: while a project mirrors Google's
/// device groups, every `/fcm/notification` call of its app goes there first, and a send to a
/// group with members this database has not seen goes there too. The front end that speaks HTTP
/// implements it (`GoogleGroupMirror` in the relay's target).
public protocol GroupMirror: Sendable {
    /// Forwards one device-group call to Google and returns its answer as it came.
    /// - Throws: `MirrorUnreachable` when no answer came (a connection refused, a timeout, an
    ///   access token that could not be had).
    func forward(_ call: MirroredGroupCall, senderID: String, settings: ChannelSettings, project: Int64) async throws
        -> MirrorAnswer

    /// Sends `message` to Google as an HTTP v1 send to `notificationKey`, which Google fans out to
    /// every member of the group, those this database knows and those it does not.
    /// - Returns: `nil` when Google accepted it, else the problem it answered.
    /// - Throws: `MirrorUnreachable` when no answer came.
    func send(
        _ message: Message, via protocolName: MessageProtocol, toNotificationKey notificationKey: String,
        settings: ChannelSettings, project: Int64
    ) async throws -> MessageProblem?
}

/// One device-group call, with what the app sent.
public enum MirroredGroupCall: Sendable, Hashable {
    case create(name: String, tokens: [String])
    case add(name: String?, key: String, tokens: [String])
    case remove(name: String?, key: String, tokens: [String])
    case lookUp(name: String)

    /// The operation's name, as the app sent it.
    public var operation: String {
        switch self {
        case .create: "create"
        case .add: "add"
        case .remove: "remove"
        case .lookUp: "look-up"
        }
    }
}

/// Google's answer to a forwarded call: what the app gets, byte for byte.
public struct MirrorAnswer: Sendable, Hashable {
    public var status: Int
    public var contentType: String?
    public var body: [UInt8]
    /// `notification_key` of a successful answer.
    public var notificationKey: String?
    /// Why the key of a look-up Google answered could not be kept here, for the log: the look-up
    /// is answered all the same (it changed nothing at Google, and the group keeps its other keys).
    public var keyNotKept: String?

    public init(status: Int, contentType: String?, body: [UInt8], notificationKey: String?) {
        self.status = status
        self.contentType = contentType
        self.body = body
        self.notificationKey = notificationKey
    }
}

/// Google could not be asked: nothing was recorded, and the app is answered 503 with `Retry-After`.
public struct MirrorUnreachable: Error, Sendable, CustomStringConvertible {
    public var reason: String

    public init(_ reason: String) {
        self.reason = reason
    }

    public var description: String { "Google's device-group API cannot be reached: \(reason)" }
}

/// Google answered, but not so that the mirror can act on it; or it accepted, and this database
/// could not record it. The app is never told a change succeeded that only one side holds.
public enum MirrorFault: Error, Sendable, Equatable, CustomStringConvertible {
    /// Google answered 200 without a `notification_key` the mirror can keep (an HTML page, a bare
    /// number, bytes that are not UTF-8, a body too large to read): Google's fault; nothing was
    /// recorded.
    case unusableAnswer(String)
    /// Google refused the mirror's own service account (401 or 403): the mirror's configuration
    /// (`project mirror`), not the app's server key; nothing was changed.
    case credentialsRefused(status: Int, account: String, words: String)
    /// Google accepted the call, and this database could not record it: the two sides differ.
    case notRecorded(operation: String, reason: String)

    public var description: String {
        switch self {
        case .unusableAnswer(let what):
            "Google's device-group API answered 200 without a usable notification_key (\(what)); nothing was recorded"
        case .credentialsRefused(let status, let account, let words):
            "Google refused the mirror's service account \(account) (HTTP \(status)\(words.isEmpty ? "" : ": " + words)): "
                + "the mirror's configuration (project mirror --service-account) needs a fix; nothing was changed"
        case .notRecorded(let operation, let reason):
            "Google accepted the \(operation), but this registry could not record it (\(reason)): "
                + "Google holds the change and this registry does not"
        }
    }
}
