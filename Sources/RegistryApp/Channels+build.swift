import Delivery
import FCMRelay
import Logging

/// The delivery channels a server holds, by name: the one list a new channel joins. The first is
/// the server's own (see `ChannelRegistry`).
enum DeliveryChannels {
    /// Each channel's kind: the relay's sink makes a message's template with the one its project's
    /// settings name, when the message is accepted.
    static let kinds: [any DeliveryChannel.Type] = [FCMChannel.self]

    /// The channels the delivery worker sends through, made once, when the server relays.
    static func make(_ configuration: ServerConfiguration, logger: Logger) throws -> ChannelRegistry {
        ChannelRegistry([try FCMChannel(options: configuration.relay, logger: logger)])
    }
}
