import Foundation
import Synchronization

/// A message the service accepted, with who would have received it.
public struct LoggedMessage: Sendable {
    public var id: String
    public var project: Int64
    /// `legacy`, `v1` or `xmpp`.
    public var protocolName: String
    /// The target as the sender wrote it (`/topics/news`, a condition, a token, …).
    public var target: String
    /// The message body as received (JSON).
    public var payload: String
    public var receivedAt: Date
    /// Tokens named directly (token and multicast targets).
    public var tokens: [String]
    /// Sorted token ids reached through a topic, condition or group.
    public var tokenIDs: [UInt32]

    public var recipientCount: Int { tokens.count + tokenIDs.count }

    public init(
        id: String = Registry.newMessageID(), project: Int64, protocolName: String, target: String, payload: String,
        receivedAt: Date = Date(), tokens: [String] = [], tokenIDs: [UInt32] = []
    ) {
        self.id = id
        self.project = project
        self.protocolName = protocolName
        self.target = target
        self.payload = payload
        self.receivedAt = receivedAt
        self.tokens = tokens
        self.tokenIDs = tokenIDs
    }
}

/// The most recent accepted messages, so that a test suite can ask what a device would have received.
///
/// This service does not deliver; it records. The log is bounded twice: by message count and by
/// the recipients it holds (a message to a popular topic reaches hundreds of thousands of tokens),
/// dropping the oldest messages first.
public final class MessageLog: Sendable {
    public let capacity: Int
    public let recipientCapacity: Int
    private let messages = Mutex<[LoggedMessage]>([])

    public init(capacity: Int = 1000, recipientCapacity: Int = 20_000_000) {
        self.capacity = capacity
        self.recipientCapacity = recipientCapacity
    }

    public func record(_ message: LoggedMessage) {
        messages.withLock { messages in
            messages.append(message)
            var recipients = messages.reduce(0) { $0 + $1.recipientCount }
            while messages.count > capacity || (recipients > recipientCapacity && messages.count > 1) {
                recipients -= messages.removeFirst().recipientCount
            }
        }
    }

    /// The project's messages, newest first.
    public func messages(in project: Int64, limit: Int) -> [LoggedMessage] {
        messages.withLock { Array($0.reversed().lazy.filter { $0.project == project }.prefix(limit)) }
    }

    /// The project's messages that reached `token` (or the token with `id`), newest first.
    public func messages(to token: String, id: UInt32?, in project: Int64, limit: Int) -> [LoggedMessage] {
        messages.withLock { messages in
            Array(
                messages.reversed().lazy.filter { message in
                    message.project == project
                        && (message.tokens.contains(token) || id.map { Self.contains(message.tokenIDs, $0) } ?? false)
                }.prefix(limit))
        }
    }

    private static func contains(_ sorted: [UInt32], _ id: UInt32) -> Bool {
        var low = 0
        var high = sorted.count
        while low < high {
            let middle = (low + high) / 2
            if sorted[middle] < id { low = middle + 1 } else { high = middle }
        }
        return low < sorted.count && sorted[low] == id
    }
}
