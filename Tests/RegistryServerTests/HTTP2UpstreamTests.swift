import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import Outbound
import Synchronization
import Testing

@testable import HTTP2FanOut

/// The relay's HTTP/2 client against a real HTTP/2 server over TLS on the loopback, one that
/// misbehaves on purpose where upstreams do: flow control, `GOAWAY` mid-page, answers out of order,
/// silence. The certificates come from `fcm-registry tls init`, hence the built executable.
@Suite("HTTP/2 upstream", .enabled(if: ServeProcess.available), .timeLimit(.minutes(1)))
struct HTTP2UpstreamTests {
    static let path = "/v1/projects/demo/messages:send"
    /// A page's headers, as FCM's channel sends them.
    static let headers: [(name: String, value: String)] = [
        ("content-type", "application/json"), ("authorization", "Bearer token"),
    ]

    /// A request body about as large as FCM's: a message to one token.
    static func requestBody(_ index: Int) -> [UInt8] {
        Array(#"{"message":{"token":"device-\#(index)","data":{"text":"hello","n":"\#(index)"}}}"#.utf8)
    }

    static let sent = Array(#"{"name":"projects/demo/messages/1"}"#.utf8)
    static let notFound = Array(#"{"error":{"code":404,"status":"NOT_FOUND"}}"#.utf8)
    static let unavailable = Array(#"{"error":{"code":503,"status":"UNAVAILABLE"}}"#.utf8)

    /// FCM's three kinds of answer, chosen by what the request says.
    @Sendable static func answerByBody(_ body: [UInt8]) -> TestHTTP2Server.Reply? {
        switch String(decoding: body, as: UTF8.self) {
        case "ok": TestHTTP2Server.Reply(status: 200, body: sent)
        case "gone": TestHTTP2Server.Reply(status: 404, body: notFound)
        case "busy": TestHTTP2Server.Reply(status: 503, retryAfter: 7, body: unavailable)
        default: TestHTTP2Server.Reply(status: 400)
        }
    }

    /// FCM's answers are small, but a page of them is not: the connection's receive window (65,535
    /// bytes) only comes back if the client returns it with `WINDOW_UPDATE` on stream 0, and without
    /// that the answers past it would wait for the deadline. 300 answers of 1,000 bytes exceed it on
    /// each of the (at most four) connections the page is split across.
    @Test("Answers larger in total than the connection's window still all arrive")
    func answersPastTheConnectionWindow() async throws {
        let answerBody = [UInt8](repeating: UInt8(ascii: "x"), count: 1_000)
        let reply: TestHTTP2Server.Replier = { _ in TestHTTP2Server.Reply(status: 200, body: answerBody) }
        try await withUpstream(reply: reply) { upstream, _ in
            let answers = await post(bodies: (0..<300).map(Self.requestBody), to: upstream, window: 50)
            let failed = failures(answers)
            #expect(failed.isEmpty, "\(failed.count) failed, the first with: \(failed.first ?? "")")
            #expect(answers.map { (try? $0.get())?.status } == [Int?](repeating: 200, count: 300))
        }
    }

    /// Servers recycle connections with `GOAWAY`: the streams above its last stream ID were never
    /// processed (RFC 9113 §6.8), so sending them again is safe, and failing them would fail
    /// deliveries that were never tried. The server sends it when it has seen more requests than it
    /// answers, so that some are certainly refused, and only on its first connection.
    @Test("Requests refused by a GOAWAY go again on a new connection")
    func refusedByGoAway() async throws {
        let reply: TestHTTP2Server.Replier = { _ in TestHTTP2Server.Reply(status: 200, body: Self.sent) }
        try await withUpstream(goAwayAfter: 10, reply: reply) { upstream, server in
            let answers = await post(bodies: (0..<60).map(Self.requestBody), to: upstream, window: 20)
            let failed = failures(answers)
            #expect(failed.isEmpty, "\(failed.count) failed, the first with: \(failed.first ?? "")")
            #expect(answers.map { (try? $0.get())?.status } == [Int?](repeating: 200, count: 60))
            #expect(server.connectionCount >= 2)
        }
    }

    /// The relay decides per recipient from its answer (delivered, unregistered, retry later), so an
    /// answer must stay with its request. The server sends the three answers newest first: matching
    /// them by arrival rather than by stream would swap them.
    @Test("Each answer keeps its own status and Retry-After")
    func answersKeepTheirRequests() async throws {
        try await withUpstream(answersInBatchesOf: 3, reply: Self.answerByBody) { upstream, _ in
            let answers = await post(bodies: ["ok", "gone", "busy"].map { Array($0.utf8) }, to: upstream, window: 3)
            let answered = try answers.map { try $0.get() }
            #expect(answered.map(\.status) == [200, 404, 503])
            #expect(answered.map(\.retryAfter) == [nil, nil, 7])
            // A success is read by its status alone; an error keeps its body (FCM's error code).
            #expect(answered.map(\.body) == [[], Self.notFound, Self.unavailable])
        }
    }

    /// A malformed answer (a body shorter than its `content-length`) is that stream's error, not
    /// the connection's: NIOHTTP2 resets the one stream, its status stands (FCM had answered), and
    /// the other requests on the connection keep their answers. Ending the connection would lose
    /// answers FCM gave, and send those messages twice.
    @Test("A malformed answer ends its own stream only, on a connection that goes on")
    func malformedAnswer() async throws {
        let reply: TestHTTP2Server.Replier = { body in
            String(decoding: body, as: UTF8.self) == "bad"
                ? TestHTTP2Server.Reply(status: 404, body: Self.notFound, declaredLength: Self.notFound.count + 10)
                : TestHTTP2Server.Reply(status: 200, body: Self.sent)
        }
        // A window of four: most requests start after the broken answer, on the same connection.
        try await withUpstream(reply: reply) { upstream, server in
            let bodies = (0..<20).map { $0 == 1 ? Array("bad".utf8) : Self.requestBody($0) }
            let answers = await post(bodies: bodies, to: upstream, window: 4)
            #expect(failures(answers).isEmpty)
            #expect(answers.map { (try? $0.get())?.status } == (0..<20).map { $0 == 1 ? 404 : 200 })
            #expect(server.connectionCount == 1)
        }
    }

    /// The client never returns a stream's own window, so an answer longer than 65,535 bytes
    /// would wait for ever; it is cut there and read by its status, not left to the deadline.
    @Test("An answer longer than a stream's window is cut and read by its status")
    func longAnswer() async throws {
        let long = [UInt8](repeating: UInt8(ascii: "x"), count: 100_000)
        let reply: TestHTTP2Server.Replier = { _ in TestHTTP2Server.Reply(status: 404, body: long) }
        try await withUpstream(reply: reply) { upstream, _ in
            let answers = await post(bodies: [Self.requestBody(1)], to: upstream, window: 1)
            let answer = try #require(try? answers.first?.get())
            #expect(answer.status == 404)
            #expect(answer.body.count <= UpstreamAnswer.maximumBodyBytes)
        }
    }

    /// The fan-out knows no channel: each request carries the pseudo-headers it writes, then the
    /// caller's headers for the page (names in lower case, as HTTP/2 requires), then its own
    /// `content-length`. APNs's and Web Push's headers go out as FCM's do.
    @Test("Each request carries the caller's headers after the pseudo-headers, and its content-length")
    func callersHeaders() async throws {
        let reply: TestHTTP2Server.Replier = { _ in TestHTTP2Server.Reply(status: 200) }
        try await withUpstream(reply: reply) { upstream, server in
            let body = Self.requestBody(1)
            let answers = await upstream.postAll(
                path: "/3/device/abc", headers: [("Content-Type", "application/json"), ("apns-topic", "demo.app")],
                bodies: [body], window: 1, timeout: .seconds(30))
            #expect(failures(answers).isEmpty)
            let seen = try #require(server.requestHeaders.first)
            #expect(
                seen.map(\.name) == [
                    ":method", ":scheme", ":authority", ":path", "content-type", "apns-topic", "content-length",
                ])
            #expect(
                seen.map(\.value) == [
                    "POST", "https", "127.0.0.1:\(server.port)", "/3/device/abc", "application/json", "demo.app",
                    "\(body.count)",
                ])
        }
    }

    /// APNs names the device in the path: with a path per body, each request goes to its own,
    /// across every lane a page is dealt to (100 requests use several) and the other headers stay the page's.
    @Test("With a path per body, each request goes to its own path")
    func pathPerBody() async throws {
        let reply: TestHTTP2Server.Replier = { _ in TestHTTP2Server.Reply(status: 200) }
        try await withUpstream(reply: reply) { upstream, server in
            let bodies = (0..<100).map { Array("device-\($0)".utf8) }
            let answers = await upstream.postAll(
                paths: (0..<100).map { "/3/device/device-\($0)" }, headers: [("apns-topic", "demo.app")],
                bodies: bodies,
                window: 20, timeout: .seconds(30))
            #expect(failures(answers).isEmpty)
            let requests = server.requests
            #expect(requests.count == 100)
            #expect(requests.allSatisfy { $0.path == "/3/device/" + String(decoding: $0.body, as: UTF8.self) })
            #expect(server.requestHeaders.allSatisfy { $0.contains { $0 == ("apns-topic", "demo.app") } })
        }
    }

    /// A stalled upstream must not hold a worker past its deadline: what has no answer fails (and
    /// the worker tries it again later) rather than waiting for an answer that never comes.
    @Test("A page past its deadline fails what is unanswered")
    func deadline() async throws {
        let silence: TestHTTP2Server.Replier = { _ in nil }
        try await withUpstream(reply: silence) { upstream, _ in
            let answers = await post(
                bodies: (0..<3).map(Self.requestBody), to: upstream, window: 3, timeout: .seconds(1))
            #expect(answers.count == 3)
            #expect(failures(answers).count == 3)
        }
    }

    /// A name that resolves to `::1`, then `127.0.0.1`, as Debian's hosts file has `localhost`.
    static let dualStack: DualStackConnector.Resolve = { _ in
        [try SocketAddress(ipAddress: "::1", port: 0), try SocketAddress(ipAddress: "127.0.0.1", port: 0)]
    }

    /// The upstream listens on one family only, and its name resolves to `::1` first: every address
    /// is tried (RFC 8305), so the page is delivered whichever family it listens on. Before, the
    /// connection that won shared its handler with the attempt that lost, and no request went out.
    @Test("A name on ::1 and 127.0.0.1 reaches an upstream listening on either one", arguments: ["127.0.0.1", "::1"])
    func dualStackName(listening host: String) async throws {
        let reply: TestHTTP2Server.Replier = { _ in TestHTTP2Server.Reply(status: 200, body: Self.sent) }
        try await withUpstream(listeningOn: host, name: "localhost", resolve: Self.dualStack, reply: reply) {
            upstream, server in
            let answers = await post(
                bodies: (0..<40).map(Self.requestBody), to: upstream, window: 10, timeout: .seconds(10))
            let failed = failures(answers)
            #expect(failed.isEmpty, "\(failed.count) failed, the first with: \(failed.first ?? "")")
            #expect(answers.map { (try? $0.get())?.status } == [Int?](repeating: 200, count: 40))
        }
    }

    /// A server stopping cancels the page it waits on: a silent upstream does not hold it until the
    /// page's deadline, and what had no answer fails as cancelled.
    @Test("A cancelled page ends at once, its unanswered requests failed")
    func cancelledPage() async throws {
        // Silent, but counting: the page is cancelled once all three requests are out, however
        // long a loaded machine takes to connect.
        final class Count: Sendable { let value = Atomic<Int>(0) }
        let count = Count()
        let silence: TestHTTP2Server.Replier = { _ in
            count.value.add(1, ordering: .relaxed)
            return nil
        }
        try await withUpstream(reply: silence) { upstream, _ in
            let page = Task {
                await post(bodies: (0..<3).map(Self.requestBody), to: upstream, window: 3, timeout: .seconds(50))
            }
            let waitedSince = ContinuousClock.now
            while count.value.load(ordering: .relaxed) < 3 && ContinuousClock.now - waitedSince < .seconds(40) {
                try await Task.sleep(for: .milliseconds(20))
            }
            #expect(count.value.load(ordering: .relaxed) == 3)
            page.cancel()
            let answers = await page.value
            #expect(answers.count == 3)
            #expect(answers.allSatisfy { if case .failure(let error) = $0 { error is CancelledPage } else { false } })
        }
    }

    /// Runs `body` with an `HTTP2Upstream` that trusts the test CA and talks to a fresh
    /// `TestHTTP2Server`, and stops both after, whatever `body` does.
    /// - Parameters:
    ///   - listeningOn: the server's address; `name` (resolved by `resolve`) is the URL's host.
    private func withUpstream(
        listeningOn address: String = "127.0.0.1", name: String? = nil, resolve: DualStackConnector.Resolve? = nil,
        goAwayAfter: Int? = nil, answersInBatchesOf batch: Int = 1, reply: @escaping TestHTTP2Server.Replier,
        _ body: (HTTP2Upstream, TestHTTP2Server) async throws -> Void
    ) async throws {
        let certificates = try TestCertificates()
        let server = try await TestHTTP2Server(
            certificates: certificates.files, host: address, goAwayAfter: goAwayAfter, answersInBatchesOf: batch,
            reply: reply)
        var failure: (any Error)?
        let url = "https://\(name ?? address):\(server.port)"
        if let upstream = HTTP2Upstream(upstream: url, caFile: certificates.files.caCertificate, resolve: resolve) {
            do { try await body(upstream, server) } catch { failure = error }
            await upstream.shutdown()
        } else {
            Issue.record("no HTTP/2 upstream for an https URL")
        }
        await server.stop()
        withExtendedLifetime(certificates) {}
        if let failure { throw failure }
    }

    /// Posts `bodies` as a page to FCM's send path, within `timeout`.
    private func post(
        bodies: [[UInt8]], to upstream: HTTP2Upstream, window: Int, timeout: Duration = .seconds(30)
    ) async -> [Result<UpstreamAnswer, any Error>] {
        await upstream.postAll(
            path: Self.path, headers: Self.headers, bodies: bodies, window: window, timeout: timeout)
    }

    /// What each failed answer's error says, so that a failing expectation shows why.
    private func failures(_ answers: [Result<UpstreamAnswer, any Error>]) -> [String] {
        answers.compactMap { answer in
            guard case .failure(let error) = answer else { return nil }
            return String(describing: error)
        }
    }
}

// MARK: - The server

/// An HTTP/2 server over TLS (ALPN `h2`) on the loopback, as small as these tests need: each
/// request is answered from its body by `reply`, frame by frame, so that a test decides what each
/// stream gets, including nothing, and can have a connection go away mid-page.
final class TestHTTP2Server: Sendable {
    /// One request's answer.
    struct Reply: Sendable {
        var status: Int
        var retryAfter: Int?
        var body: [UInt8] = []
        /// A `content-length` other than the body's, for a malformed answer.
        var declaredLength: Int?
    }

    /// The answer to a request body; `nil` leaves the request unanswered.
    typealias Replier = @Sendable (_ body: [UInt8]) -> Reply?

    let port: Int
    private let listener: any Channel
    private let accepted: AcceptedConnections

    /// The connections accepted, in order: counted by tests, closed by `stop`.
    private final class AcceptedConnections: Sendable {
        let channels = Mutex<[any Channel]>([])
    }

    /// How many connections the server has accepted.
    var connectionCount: Int { accepted.channels.withLock { $0.count } }

    /// Each request's header list as it arrived, in the order the requests began.
    var requestHeaders: [[(name: String, value: String)]] { seen.headers.withLock { $0 } }
    /// Each request's `:path` and body, in the order the requests ended.
    var requests: [(path: String, body: [UInt8])] { seen.requests.withLock { $0 } }
    private let seen: RequestsSeen

    /// What the connections saw, shared by all of them.
    final class RequestsSeen: Sendable {
        let headers = Mutex<[[(name: String, value: String)]]>([])
        let requests = Mutex<[(path: String, body: [UInt8])]>([])
    }

    /// Listens on a free port of `host` (127.0.0.1 unless a test says otherwise).
    /// - Parameters:
    ///   - goAwayAfter: on the first connection only, once more requests than this have arrived,
    ///     a `GOAWAY` naming the last answered stream; the streams above it are refused (never answered).
    ///   - batch: answers are held until this many are ready, then sent newest first.
    init(
        certificates: TestCertificates.Files, host: String = "127.0.0.1", goAwayAfter: Int? = nil,
        answersInBatchesOf batch: Int = 1, reply: @escaping Replier
    ) async throws {
        let chain = try NIOSSLCertificate.fromPEMFile(certificates.serverCertificate)
        let key = try NIOSSLPrivateKey(file: certificates.serverKey, format: .pem)
        var configuration = TLSConfiguration.makeServerConfiguration(
            certificateChain: chain.map { .certificate($0) }, privateKey: .privateKey(key))
        configuration.applicationProtocols = ["h2"]
        let tls = try NIOSSLContext(configuration: configuration)
        let accepted = AcceptedConnections()
        let seen = RequestsSeen()
        // The server may send what a broken upstream would: a `content-length` that lies.
        let serverConfiguration = {
            var configuration = NIOHTTP2Handler.ConnectionConfiguration()
            configuration.contentLengthValidation = .disabled
            return configuration
        }()
        let listener = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .childChannelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    let index = accepted.channels.withLock { channels in
                        channels.append(channel)
                        return channels.count - 1
                    }
                    try channel.pipeline.syncOperations.addHandlers(
                        NIOSSLServerHandler(context: tls),
                        NIOHTTP2Handler(
                            mode: .server, connectionConfiguration: serverConfiguration, streamConfiguration: .init()),
                        FrameAnswerer(
                            goAwayAfter: index == 0 ? goAwayAfter : nil, batch: batch, seen: seen, reply: reply))
                }
            }
            .bind(host: host, port: 0).get()
        guard let port = listener.localAddress?.port else {
            try? await listener.close()
            throw ChannelError.unknownLocalAddress
        }
        self.port = port
        self.listener = listener
        self.accepted = accepted
        self.seen = seen
    }

    /// Stops listening and closes every connection still open.
    func stop() async {
        try? await listener.close()
        for channel in accepted.channels.withLock({ $0 }) { try? await channel.close() }
    }
}

/// One connection of `TestHTTP2Server`, frame by frame. Without a stream multiplexer it sees each
/// frame with its stream ID, which is what lets it refuse streams with a `GOAWAY` mid-page; it also
/// means NIOHTTP2 returns no receive window for it, so it returns the connection's itself, as a
/// server must for a client that sends more than 65,535 bytes of requests. Used only on its
/// connection's event loop.
private final class FrameAnswerer: ChannelInboundHandler {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    /// The connection window goes back in steps, as servers return it, not a frame at a time.
    static let windowReturnStep = 16_384

    private let goAwayAfter: Int?
    private let batch: Int
    private let reply: TestHTTP2Server.Replier
    private let seen: TestHTTP2Server.RequestsSeen
    /// Each open request's `:path`, by stream.
    private var paths: [HTTP2StreamID: String] = [:]
    /// Each open request's body so far, by stream.
    private var bodies: [HTTP2StreamID: [UInt8]] = [:]
    private var requestsSeen = 0
    private var lastAnswered = HTTP2StreamID.rootStream
    /// Once the `GOAWAY` is sent: the streams above this one are refused.
    private var refusedAbove: HTTP2StreamID?
    private var held: [(streamID: HTTP2StreamID, reply: TestHTTP2Server.Reply)] = []
    private var unreturnedBytes = 0

    init(goAwayAfter: Int?, batch: Int, seen: TestHTTP2Server.RequestsSeen, reply: @escaping TestHTTP2Server.Replier) {
        self.goAwayAfter = goAwayAfter
        self.batch = max(1, batch)
        self.seen = seen
        self.reply = reply
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.payload {
        case .headers(let headers) where bodies[frame.streamID] == nil:
            requestsSeen += 1
            bodies[frame.streamID] = []
            seen.headers.withLock { $0.append(headers.headers.map { (name: $0.name, value: $0.value) }) }
            paths[frame.streamID] = headers.headers.first(name: ":path") ?? ""
            if let goAwayAfter, refusedAbove == nil, requestsSeen > goAwayAfter {
                refusedAbove = lastAnswered
                let goAway = HTTP2Frame.FramePayload.goAway(
                    lastStreamID: lastAnswered, errorCode: .noError, opaqueData: nil)
                context.write(wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: goAway)), promise: nil)
            }
            if headers.endStream { requestEnded(frame.streamID, context: context) }
        case .data(let data):
            guard case .byteBuffer(let buffer) = data.data else { break }
            returnWindow(buffer.readableBytes + (data.paddingBytes.map { $0 + 1 } ?? 0), context: context)
            bodies[frame.streamID]?.append(contentsOf: buffer.readableBytesView)
            if data.endStream { requestEnded(frame.streamID, context: context) }
        default:
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        context.flush()
        context.fireChannelReadComplete()
    }

    /// A broken connection is closed; the client's next page opens another.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        context.close(promise: nil)
    }

    private func requestEnded(_ streamID: HTTP2StreamID, context: ChannelHandlerContext) {
        guard let body = bodies.removeValue(forKey: streamID) else { return }
        let path = paths.removeValue(forKey: streamID) ?? ""
        seen.requests.withLock { $0.append((path, body)) }
        if let refusedAbove, streamID > refusedAbove { return }
        guard let answer = reply(body) else { return }
        held.append((streamID, answer))
        guard held.count >= batch else { return }
        for ready in held.reversed() { write(ready.reply, on: ready.streamID, context: context) }
        held.removeAll()
    }

    private func write(_ answer: TestHTTP2Server.Reply, on streamID: HTTP2StreamID, context: ChannelHandlerContext) {
        var headers = HPACKHeaders([
            (":status", String(answer.status)), ("content-type", "application/json"),
            ("content-length", String(answer.declaredLength ?? answer.body.count)),
        ])
        if let retryAfter = answer.retryAfter { headers.add(name: "retry-after", value: String(retryAfter)) }
        context.write(
            wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers)))), promise: nil)
        let body = HTTP2Frame.FramePayload.Data(data: .byteBuffer(ByteBuffer(bytes: answer.body)), endStream: true)
        context.write(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .data(body))), promise: nil)
        lastAnswered = max(lastAnswered, streamID)
    }

    private func returnWindow(_ bytes: Int, context: ChannelHandlerContext) {
        unreturnedBytes += bytes
        guard unreturnedBytes >= Self.windowReturnStep else { return }
        let update = HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: unreturnedBytes))
        context.write(wrapOutboundOut(update), promise: nil)
        unreturnedBytes = 0
    }
}
