import Delivery
import FCMRelay
import Logging

/// The delivery channels a server holds: the one list a new channel joins, one line each. The
/// first is the server's own (see `ChannelRegistry`).
enum DeliveryChannels {
    /// A channel the server holds: its kind, which the relay's sink asks for a message's template
    /// when the message is accepted, and how the delivery worker's instance is made.
    struct Entry: Sendable {
        let kind: any DeliveryChannel.Type
        let make: @Sendable (ServerConfiguration, Logger) throws -> any DeliveryChannel
    }

    static let all: [Entry] = [
        Entry(kind: FCMChannel.self) { try FCMChannel(options: $0.relay, logger: $1) }
    ]

    /// Each channel's kind, for the relay's sink.
    static var kinds: [any DeliveryChannel.Type] { all.map(\.kind) }

    /// The channels the delivery worker sends through, made once, when the server relays.
    static func make(_ configuration: ServerConfiguration, logger: Logger) throws -> ChannelRegistry {
        ChannelRegistry(try all.map { try $0.make(configuration, logger) })
    }
}
