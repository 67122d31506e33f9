import Foundation
import NIOCore
import NIOPosix
import NIOSSL
import NIOTLS
import Synchronization

/// A local CA and server certificate in a folder of their own, made by `fcm-registry tls init`
/// (tests that use them need the built executable), removed with it.
final class TestCertificates {
    struct Files {
        var caCertificate: String
        var serverCertificate: String
        var serverKey: String
    }

    let folder = FileManager.default.temporaryDirectory.appendingPathComponent("certs-\(UUID())").path
    var files: Files {
        Files(
            caCertificate: folder + "/ca.pem", serverCertificate: folder + "/server.pem",
            serverKey: folder + "/server-key.pem")
    }

    init() throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: ServeProcess.binary)
        process.arguments = ["tls", "init", "--dir", folder]
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw POSIXError(.EIO) }
    }

    deinit { try? FileManager.default.removeItem(atPath: folder) }
}

/// A TLS client for the TLS listeners' tests: it trusts the test's CA, offers the ALPN protocols
/// it is given, and reads what the server sends.
enum TLSTestClient {
    /// What the server sent, and the protocol ALPN settled on.
    struct Exchange {
        var text: String
        var negotiatedProtocol: String?
    }

    /// Connects to `port` on the loopback, completes the handshake, writes `request` (nothing
    /// when `nil`) and returns what the server sent until it closed the connection (or, with
    /// `marker`, up to that text); `nil` when `seconds` pass first (the connection is then dropped).
    static func exchange(
        port: Int, trusting ca: String, alpn: [String], serverName: String = "fcm.googleapis.com", request: String?,
        until marker: String? = nil, seconds: Int = 10
    ) async throws -> Exchange? {
        var configuration = TLSConfiguration.makeClientConfiguration()
        configuration.trustRoots = .file(ca)
        configuration.applicationProtocols = alpn
        let context = try NIOSSLContext(configuration: configuration)
        let recorder = ALPNRecorder()
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connect(host: "127.0.0.1", port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        NIOSSLClientHandler(context: context, serverHostname: serverName))
                    try channel.pipeline.syncOperations.addHandler(recorder)
                    return try NIOAsyncChannel<ByteBuffer, ByteBuffer>(wrappingChannelSynchronously: channel)
                }
            }
        let connection = channel.channel
        let text = try await withThrowingTaskGroup(of: String?.self) { group in
            group.addTask {
                try await channel.executeThenClose { inbound, outbound in
                    if let request { try await outbound.write(ByteBuffer(string: request)) }
                    var text = ""
                    do {
                        for try await buffer in inbound {
                            text += String(buffer: buffer)
                            if let marker, text.contains(marker) { break }
                        }
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
        return text.map { Exchange(text: $0, negotiatedProtocol: recorder.negotiated.withLock { $0 }) }
    }
}

/// Records the ALPN protocol a TLS handshake settled on.
final class ALPNRecorder: ChannelInboundHandler, Sendable {
    typealias InboundIn = ByteBuffer
    let negotiated = Mutex<String?>(nil)

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if case .handshakeCompleted(let negotiatedProtocol) = event as? TLSUserEvent {
            negotiated.withLock { $0 = negotiatedProtocol }
        }
        context.fireUserInboundEventTriggered(event)
    }
}
