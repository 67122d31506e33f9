import Delivery
import Foundation
import Hummingbird
import HummingbirdTesting
import NIOCore
import NIOPosix
import NIOSSL
import Outbound
import Registry
import Synchronization
import Testing

@testable import FCMRelay
@testable import Webhooks

/// Every outgoing client tries every address of a name, as RFC 8305 (Happy Eyeballs) says, against
/// real listeners on the loopback: a name on `::1` and `127.0.0.1` (as Debian's hosts file has
/// `localhost`) reaches a server listening on either one. And a connection that fails says why in
/// plain words.
@Suite("Dual-stack connections", .timeLimit(.minutes(1)))
struct DualStackTests {
    static let loop = MultiThreadedEventLoopGroup.singleton.next()

    /// `::1`, then `127.0.0.1`.
    static let both: DualStackConnector.Resolve = { _ in
        [try SocketAddress(ipAddress: "::1", port: 0), try SocketAddress(ipAddress: "127.0.0.1", port: 0)]
    }

    /// No address at all.
    static let none: DualStackConnector.Resolve = { _ in [] }

    // MARK: - The race

    @Test("The first address refuses: the next one is tried at once and connects", arguments: ["127.0.0.1", "::1"])
    func refusedThenNext(listening host: String) async throws {
        let listener = try await Self.listen(on: host)
        let port = try #require(listener.localAddress?.port)
        let channel = try await DualStackConnector.connect(
            host: "localhost", port: port, resolve: Self.both, on: Self.loop, timeout: .seconds(5)
        ) { $0.eventLoop.makeSucceededVoidFuture() }
        #expect(channel.remoteAddress?.ipAddress == host)
        try await channel.close()
        try await listener.close()
    }

    @Test("Both families listen: IPv6 wins")
    func ipv6First() async throws {
        let six = try await Self.listen(on: "::1")
        let port = try #require(six.localAddress?.port)
        let four = try await Self.listen(on: "127.0.0.1", port: port)
        let v4First: DualStackConnector.Resolve = { _ in
            [try SocketAddress(ipAddress: "127.0.0.1", port: 0), try SocketAddress(ipAddress: "::1", port: 0)]
        }
        let channel = try await DualStackConnector.connect(
            host: "localhost", port: port, resolve: v4First, on: Self.loop, timeout: .seconds(5)
        ) { $0.eventLoop.makeSucceededVoidFuture() }
        #expect(channel.remoteAddress?.ipAddress == "::1")
        try await channel.close()
        try await six.close()
        try await four.close()
    }

    /// `::1` takes no connection (its backlog is full and nothing accepts: the SYN goes unanswered,
    /// as to a host that is not there); after the connection delay `127.0.0.1` is tried, and wins.
    @Test("The first address never answers: the next one is tried after the delay and wins")
    func silentThenNext() async throws {
        let silent = try await ServerBootstrap(group: Self.loop)
            .serverChannelOption(.backlog, value: 0)
            .serverChannelOption(.autoRead, value: false)
            .bind(host: "::1", port: 0).get()
        let port = try #require(silent.localAddress?.port)
        // The one connection the backlog holds.
        let filler = try await ClientBootstrap(group: Self.loop).connect(host: "::1", port: port).get()
        let four = try await Self.listen(on: "127.0.0.1", port: port)
        let channel = try await DualStackConnector.connect(
            host: "localhost", port: port, resolve: Self.both, on: Self.loop, timeout: .seconds(5)
        ) { $0.eventLoop.makeSucceededVoidFuture() }
        #expect(channel.remoteAddress?.ipAddress == "127.0.0.1")
        try await channel.close()
        try await filler.close()
        try await silent.close()
        try await four.close()
    }

    /// A server stopping while a connection waits on an address that never answers: the wait
    /// ends at once, not at the connect timeout.
    @Test("A cancelled connection attempt ends at once")
    func cancelledWhileConnecting() async throws {
        let silent = try await ServerBootstrap(group: Self.loop)
            .serverChannelOption(.backlog, value: 0)
            .serverChannelOption(.autoRead, value: false)
            .bind(host: "::1", port: 0).get()
        let port = try #require(silent.localAddress?.port)
        let filler = try await ClientBootstrap(group: Self.loop).connect(host: "::1", port: port).get()
        let onlySix: DualStackConnector.Resolve = { _ in [try SocketAddress(ipAddress: "::1", port: 0)] }
        let attempt = Task {
            try await DualStackConnector.connect(
                host: "localhost", port: port, resolve: onlySix, on: Self.loop, timeout: .seconds(50)
            ) { $0.eventLoop.makeSucceededVoidFuture() }
        }
        try await Task.sleep(for: .milliseconds(300))
        attempt.cancel()
        await #expect(throws: CancellationError.self) { try await attempt.value }
        try await filler.close()
        try await silent.close()
    }

    // MARK: - The words

    @Test("A refused connection names every address it tried")
    func refusedWords() async throws {
        let port = try await Self.freePort()
        await #expect(throws: ConnectionFailure("connection refused by [::1]:\(port) and 127.0.0.1:\(port)")) {
            try await DualStackConnector.connect(
                host: "localhost", port: port, resolve: Self.both, on: Self.loop, timeout: .seconds(5)
            ) { $0.eventLoop.makeSucceededVoidFuture() }
        }
        await #expect(throws: ConnectionFailure("no address for name nowhere.invalid")) {
            try await DualStackConnector.connect(
                host: "nowhere.invalid", port: port, resolve: Self.none, on: Self.loop, timeout: .seconds(5)
            ) { $0.eventLoop.makeSucceededVoidFuture() }
        }
    }

    @Test("Durations and TLS failures in words")
    func otherWords() {
        #expect(ConnectionFailure.seconds(.seconds(10)) == "10 s")
        #expect(ConnectionFailure.seconds(.milliseconds(1500)) == "1.5 s")
        #expect(ConnectionFailure.seconds(.milliseconds(9998)) == "10 s")
        #expect(ConnectionFailure.words(for: NIOSSLError.uncleanShutdown) == "the connection closed without ending TLS")
        #expect(
            ConnectionFailure.words(for: ChannelError.connectTimeout(.seconds(10))) == "timed out after 10 s connecting"
        )
        #expect(ConnectionFailure("caf\u{e9}\n").description == "caf\\u{e9}\\u{a}")
    }

    // MARK: - Every client

    /// The relay's HTTP/2 path, as FCM's channel uses it: see `HTTP2UpstreamTests.dualStackName`.
    /// The webhooks' channel connects only to the addresses it checked, and races them.
    @Test(
        "A webhook on a name with ::1 and 127.0.0.1 is delivered whichever one listens",
        arguments: ["127.0.0.1", "::1"])
    func webhookDualStack(listening host: String) async throws {
        try await Self.receiver(on: host) { port, received in
            let channel = HTTPWebhookChannel(options: Self.webhookOptions()) { _ in ["::1", "127.0.0.1"] }
            let result = await channel.send(Self.delivery(url: "http://localhost:\(port)/hook"))
            #expect(result == .delivered)
            #expect(received.count.load(ordering: .relaxed) == 1)
        }
    }

    @Test("A webhook's failed connection is recorded in plain words")
    func webhookWords() async throws {
        let port = try await Self.freePort()
        let channel = HTTPWebhookChannel(options: Self.webhookOptions()) { _ in ["::1", "127.0.0.1"] }
        let result = await channel.send(Self.delivery(url: "http://localhost:\(port)/hook"))
        #expect(result == .failed("connection refused by [::1]:\(port) and 127.0.0.1:\(port)"))
        let single = await HTTPWebhookChannel(options: Self.webhookOptions()).send(
            Self.delivery(url: "http://127.0.0.1:\(port)/hook"))
        #expect(single == .failed("connection refused by 127.0.0.1:\(port)"))
    }

    @Test("A webhook whose certificate is not trusted fails its TLS handshake, in words")
    func webhookTLSWords() async throws {
        let certificates = try TestCertificates()
        // The server's certificate is signed by the test CA, which this channel does not trust.
        let server = try await TestHTTP2Server(certificates: certificates.files) { _ in nil }
        let result = await HTTPWebhookChannel(options: Self.webhookOptions()).send(
            Self.delivery(url: "https://127.0.0.1:\(server.port)/hook"))
        #expect(result == .failed("TLS handshake failed: certificate verify failed"))
        await server.stop()
        withExtendedLifetime(certificates) {}
    }

    /// async-http-client (an `http` upstream, token endpoints, the mirror) connects through NIO's
    /// own race, with the system's resolver: this holds it to that where `localhost` has both
    /// addresses (Debian's hosts file; here under a private mount of one, see the relay guide).
    @Test(
        "The general client reaches a dual-stack name on either family",
        .enabled(if: Self.localhostHasBothFamilies, "localhost must resolve to ::1 and 127.0.0.1"),
        arguments: ["127.0.0.1", "::1"])
    func generalClientDualStack(listening host: String) async throws {
        try await Self.receiver(on: host) { port, received in
            var options = RelayOptions()
            options.requestTimeout = .seconds(10)
            let client = try UpstreamClient(options: options)
            let answer = try await client.post(
                "http://localhost:\(port)/hook", contentType: "application/json", authorization: nil,
                body: Array("{}".utf8))
            try await client.shutdown()
            #expect(answer.status == 204)
            #expect(received.count.load(ordering: .relaxed) == 1)
        }
    }

    // MARK: - Helpers

    static var localhostHasBothFamilies: Bool {
        guard let addresses = try? GetaddrinfoResolved.localhost() else { return false }
        return addresses.contains("::1") && addresses.contains("127.0.0.1")
    }

    /// A listener that accepts and holds connections.
    static func listen(on host: String, port: Int = 0) async throws -> any Channel {
        try await ServerBootstrap(group: loop).bind(host: host, port: port).get()
    }

    /// A port nothing listens on, on either family.
    static func freePort() async throws -> Int {
        for _ in 0..<20 {
            let probe = try await listen(on: "::1")
            let port = try #require(probe.localAddress?.port)
            try await probe.close()
            if let four = try? await listen(on: "127.0.0.1", port: port) {
                try await four.close()
                return port
            }
        }
        throw ChannelError.unknownLocalAddress
    }

    /// An HTTP receiver on `host` only, answering 204 and counting what it received.
    static func receiver(on host: String, _ body: @escaping @Sendable (Int, Received) async throws -> Void)
        async throws
    {
        let received = Received()
        let router = Router()
        router.post("/hook") { request, _ -> Response in
            _ = try await request.body.collect(upTo: 1 << 20)
            received.count.add(1, ordering: .relaxed)
            return Response(status: .noContent)
        }
        let app = Application(router: router, configuration: .init(address: .hostname(host, port: 0)))
        try await app.test(.live) { client in
            try await body(try #require(client.port), received)
        }
    }

    final class Received: Sendable {
        let count = Atomic<Int>(0)
    }

    static func delivery(url: String) -> WebhookDelivery {
        WebhookDelivery(
            id: 1, webhook: 1, webhookID: "wh_test", project: 1, eventID: "msg_test", type: "message.completed",
            payload: #"{"type":"message.completed","timestamp":"2026-01-01T00:00:00.000Z","data":{}}"#, attempts: 0,
            url: url, secret: WebhookRules.makeSecret(), previousSecret: nil)
    }

    static func webhookOptions() -> WebhookOptions {
        var options = WebhookOptions()
        options.allowPrivateNetworks = true
        options.timeout = .seconds(10)
        return options
    }
}

/// What the system's resolver says of `localhost`, as text addresses (`getent ahosts`).
enum GetaddrinfoResolved {
    static func localhost() throws -> [String] {
        let getent = Process()
        getent.executableURL = URL(fileURLWithPath: "/usr/bin/getent")
        getent.arguments = ["ahosts", "localhost"]
        let output = Pipe()
        getent.standardOutput = output
        try getent.run()
        let text = String(decoding: output.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        getent.waitUntilExit()
        return text.split(separator: "\n").compactMap { $0.split(separator: " ").first.map(String.init) }
    }
}
