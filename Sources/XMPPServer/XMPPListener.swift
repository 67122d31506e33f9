import ConnectionGuards
import HummingbirdCore
import Logging
import NIOCore
import NIOPosix
import NIOSSL
import Registry
import ServiceLifecycle
import Synchronization

/// How XMPP connections are bounded (all set from `serve`'s options).
public struct XMPPSettings: Sendable {
    /// Bytes of one stanza.
    public var stanzaBytes = 64 * 1024
    /// SASL must succeed within this time of the connection.
    public var loginTimeout = Duration.seconds(10)
    /// A connection that sends nothing (not even a whitespace keepalive or a ping) this long is closed.
    public var idleTimeout = Duration.seconds(300)
    /// Bytes waiting to be written to a client that does not read; past it the connection is closed.
    public var outboxBytes = 4 << 20
    /// Bytes of one stanza before SASL succeeds (an `<auth>` is a few hundred).
    public var loginStanzaBytes = 16 * 1024

    public init() {}
}

/// The XMPP connection server: accepts client streams on `port`, with TLS from the first byte
/// (CCS never used STARTTLS) unless `tls` is `nil`, and serves each as an `XMPPConnection`.
///
/// At `maximumConnections` it stops accepting, as the HTTP listeners do, and connections that
/// have not begun to log in a third of the login timeout after connecting give way to newcomers
/// (``SilentConnections``):
/// sockets that never log in cannot keep an app server out, and a flood of them costs the server
/// no more accepts and closes than the login timeout alone would.
///
/// On graceful shutdown it stops accepting, drains every session (`CONNECTION_DRAINING`), and
/// returns once they have closed; the service group's deadline cancels what is left.
public struct XMPPListener: Service, CustomStringConvertible {
    let registry: RegistryService
    let hub: XMPPHub
    let host: String
    let port: Int
    let tls: NIOSSLContext?
    let settings: XMPPSettings
    let maximumConnections: Int
    let logger: Logger
    /// Told the port once listening (tests bind port 0).
    let onListening: @Sendable (Int) async -> Void

    public init(
        registry: RegistryService, hub: XMPPHub, host: String, port: Int, tls: NIOSSLContext?, settings: XMPPSettings,
        maximumConnections: Int, logger: Logger, onListening: @escaping @Sendable (Int) async -> Void = { _ in }
    ) {
        self.registry = registry
        self.hub = hub
        self.host = host
        self.port = port
        self.tls = tls
        self.settings = settings
        self.maximumConnections = maximumConnections
        self.logger = logger
        self.onListening = onListening
    }

    /// TLS for XMPP: the listener's certificate, and ALPN `xmpp-client` for clients that offer it
    /// (a client offering only other protocols still connects, without ALPN).
    public static func tlsContext(_ server: TLSConfiguration) throws -> NIOSSLContext {
        var configuration = server
        configuration.applicationProtocols = ["xmpp-client"]
        return try NIOSSLContext(configuration: configuration)
    }

    public var description: String { "XMPPListener" }

    public func run() async throws {
        let tls = tls
        let silent = SilentConnections(
            spacing: SilentConnections.spacing(
                headerTimeout: settings.loginTimeout, maximumConnections: maximumConnections),
            grace: TimeAmount(settings.loginTimeout / 3), logger: logger)
        let limit = ConnectionLimit(maximumConnections, makingRoomIn: silent, listener: "xmpp", logger: logger)
        let server = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(AvailableConnectionsChannelHandler(delegate: limit))
                }
            }
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
            .bind(host: host, port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    if let tls { try channel.pipeline.syncOperations.addHandler(NIOSSLServerHandler(context: tls)) }
                    return try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        let boundPort = server.channel.localAddress?.port ?? port
        logger.info(
            "xmpp listening", metadata: ["xmpp.port": "\(boundPort)", "xmpp.tls": "\(tls == nil ? "off" : "on")"])
        await onListening(boundPort)
        let connection = XMPPConnection(registry: registry, hub: hub, settings: settings, silent: silent, logger: logger)
        try await withGracefulShutdownHandler {
            try await withThrowingDiscardingTaskGroup { group in
                try await server.executeThenClose { connections in
                    for try await client in connections {
                        group.addTask { await connection.run(client) }
                    }
                }
            }
        } onGracefulShutdown: { [hub] in
            server.channel.close(promise: nil)
            hub.drainAll()
        }
    }
}
