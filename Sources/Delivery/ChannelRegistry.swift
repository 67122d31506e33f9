/// The channels a server delivers through, by name, as swift-jobs' `JobRegistry` holds jobs: the
/// engine never names a channel's type, it asks for the one a recipient goes through.
///
/// The composition root registers each channel once (`Channels+build.swift` in `RegistryApp`); the
/// first registered is the server's own, which words what a job for a channel this server does
/// not hold needs worded (its deadline, its recipients already gone).
public struct ChannelRegistry: Sendable {
    private var byName: [String: any DeliveryChannel] = [:]
    /// The channels, in the order they were registered.
    public private(set) var channels: [any DeliveryChannel] = []

    public init() {}

    /// - Parameter channels: channels with distinct names, the server's own first.
    public init(_ channels: [any DeliveryChannel]) {
        for channel in channels { register(channel) }
    }

    /// Adds a channel under its name (`DeliveryChannel.name`), once.
    public mutating func register(_ channel: any DeliveryChannel) {
        let name = type(of: channel).name
        precondition(byName[name] == nil, "two channels named \(name)")
        byName[name] = channel
        channels.append(channel)
    }

    /// The channel named `name`.
    /// - Throws: `UnknownChannel` when this server holds none by that name (settings written by a
    ///   newer version, say).
    public func channel(named name: String) throws(UnknownChannel) -> any DeliveryChannel {
        guard let channel = byName[name] else { throw UnknownChannel(name: name, known: names) }
        return channel
    }

    /// The server's own channel: the first registered.
    public var first: (any DeliveryChannel)? { channels.first }

    /// The names of the channels held, in order.
    public var names: [String] { channels.map { type(of: $0).name } }
}

/// Settings name a channel this server does not hold.
public struct UnknownChannel: Error, Sendable, Hashable, CustomStringConvertible {
    public var name: String
    /// The channels the server holds.
    public var known: [String]

    public var description: String {
        "no channel named \(name) on this server, which delivers through \(known.isEmpty ? "none" : known.joined(separator: ", "))"
    }
}
