import Foundation
import NIOCore
import NIOPosix
import NIOSSL

/// A TLS client for the TLS listener's tests: it trusts the test's CA, offers the ALPN protocols
/// it is given, and reads what the server sends.
enum TLSTestClient {
    /// Connects to `port` on the loopback, completes the handshake, writes `request` (nothing
    /// when `nil`) and returns what the server sent until it closed the connection; `nil` when
    /// `seconds` pass first (the connection is then dropped).
    static func exchange(port: Int, trusting ca: String, alpn: [String], request: String?, seconds: Int = 10)
        async throws -> String?
    {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.trustRoots = .file(ca)
        configuration.applicationProtocols = alpn
        let context = try NIOSSLContext(configuration: configuration)
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        NIOSSLClientHandler(context: context, serverHostname: "fcm.googleapis.com"))
                    return try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        let connection = channel.channel
        return try await withThrowingTaskGroup(of: String?.self) { group in
            group.addTask {
                try await channel.executeThenClose { inbound, outbound in
                    if let request { try await outbound.write(ByteBuffer(string: request)) }
                    var text = ""
                    do {
                        for try await buffer in inbound { text += String(buffer: buffer) }
                    } catch {
                        // A close without TLS's close_notify: the server ended it all the same.
                    }
                    return text
                }
            }
            group.addTask {
                try await Task.sleep(for: .seconds(seconds))
                return nil
            }
            let first = try await group.next() ?? nil
            group.cancelAll()
            if first == nil { connection.close(promise: nil) }
            return first
        }
    }
}
