import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL

/// The fan-out path to an `https` upstream: one TLS connection speaking HTTP/2 (ALPN `h2`, as FCM
/// and every proxy in front of it do), on which a window of requests runs as streams, each
/// started by the completion of another on the connection's event loop. A page of recipients
/// costs one hop into the event loop and one back, not a task per request: general-purpose
/// clients spend most of a delivery's time in those hops.
///
/// Bounded like every client of the relay: TLS verified against the system's trust store (plus
/// `--relay-ca-file`), a connect timeout, answers cut at `UpstreamClient.maximumAnswerBytes`,
/// header lists at NIOHTTP2's default bound, and each page under the worker's deadline.
final class HTTP2Upstream: Sendable {
    private let host: String
    private let port: Int
    private let tls: NIOSSLContext
    private let connection = NIOLockedValueBox<(channel: any Channel, streams: NIOHTTP2Handler.StreamMultiplexer)?>(nil)

    /// `https://host[:port]` only; `nil` for any other upstream (the general client serves it).
    init?(upstream: String, caFile: String?) {
        guard let url = URLComponents(string: upstream), url.scheme?.lowercased() == "https", let host = url.host
        else { return nil }
        var configuration = TLSConfiguration.makeClientConfiguration()
        if let caFile { configuration.additionalTrustRoots = [.file(caFile)] }
        configuration.applicationProtocols = ["h2"]
        guard let context = try? NIOSSLContext(configuration: configuration) else { return nil }
        self.host = host
        port = url.port ?? 443
        tls = context
    }

    /// Posts every body to `path` with `headers`, at most `window` at a time, all within `timeout`:
    /// past it, what is unanswered fails and the connection (stalled, or half open) is closed.
    /// - Returns: each body's answer, in order, or the error that left it without one.
    func postAll(path: String, authorization: String, bodies: [[UInt8]], window: Int, timeout: Duration) async
        -> [Result<UpstreamClient.Answer, any Error>]
    {
        let open: (channel: any Channel, streams: NIOHTTP2Handler.StreamMultiplexer)
        do {
            open = try await connected()
        } catch {
            return bodies.map { _ in .failure(error) }
        }
        let head = HPACKHeaders([
            (":method", "POST"), (":scheme", "https"), (":authority", port == 443 ? host : "\(host):\(port)"),
            (":path", path), ("content-type", "application/json"), ("authorization", authorization),
            ("user-agent", "fcm-registry-relay"),
        ])
        let loop = open.channel.eventLoop
        let page = PageOfStreams(count: bodies.count, loop: loop)
        let streams = open.streams
        @Sendable func launch(_ index: Int) {
            let promise = loop.makePromise(of: UpstreamClient.Answer.self)
            page.started(index, promise)
            // A stream the connection could not open (it closed meanwhile) fails its request.
            let opened = loop.makePromise(of: (any Channel).self)
            opened.futureResult.whenFailure { promise.fail($0) }
            streams.createStreamChannel(promise: opened) { stream in
                stream.eventLoop.makeCompletedFuture {
                    try stream.pipeline.syncOperations.addHandler(
                        OneExchange(head: head, body: bodies[index], answer: promise))
                }
            }
            promise.futureResult.whenComplete { result in
                if let next = page.complete(index, with: result) { launch(next) }
            }
        }
        let channel = open.channel
        loop.execute {
            let deadline = loop.scheduleTask(in: .nanoseconds(Int64(timeout.components.seconds) * 1_000_000_000)) {
                page.expire(ChannelError.connectTimeout(.seconds(timeout.components.seconds)))
                channel.close(promise: nil)
            }
            page.all.futureResult.whenComplete { _ in deadline.cancel() }
            for _ in 0..<min(max(1, window), bodies.count) { launch(page.take()) }
        }
        let results: [Result<UpstreamClient.Answer, any Error>] =
            (try? await page.all.futureResult.get()) ?? bodies.map { _ in .failure(ChannelError.ioOnClosedChannel) }
        if results.contains(where: { if case .failure = $0 { true } else { false } }) { dropIfClosed(open.channel) }
        return results
    }

    /// The open connection, or a new one.
    private func connected() async throws -> (channel: any Channel, streams: NIOHTTP2Handler.StreamMultiplexer) {
        if let open = connection.withLockedValue({ $0 }), open.channel.isActive { return open }
        let tls = tls
        let host = host
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connectTimeout(.seconds(10))
            .channelInitializer { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHandler(
                        NIOSSLClientHandler(context: tls, serverHostname: host.first?.isNumber == true ? nil : host))
                }
            }
            .connect(host: host, port: port).get()
        let streams = try await channel.eventLoop.submit {
            try channel.pipeline.syncOperations.configureHTTP2Pipeline(
                mode: .client, connectionConfiguration: .init(), streamConfiguration: .init(),
                inboundStreamInitializer: { $0.close() })
        }.get()
        let made = (channel: channel as any Channel, streams: streams)
        // Two pages may connect at once: the first live connection stays, the other is closed.
        let (kept, closing) = connection.withLockedValue {
            current -> ((channel: any Channel, streams: NIOHTTP2Handler.StreamMultiplexer), (any Channel)?) in
            if let current, current.channel.isActive { return (current, made.channel) }
            let stale = current?.channel
            current = made
            return (made, stale)
        }
        closing?.close(promise: nil)
        return kept
    }

    private func dropIfClosed(_ channel: any Channel) {
        guard !channel.isActive else { return }
        connection.withLockedValue { current in
            if current?.channel === channel { current = nil }
        }
    }

    func shutdown() async {
        if let open = connection.withLockedValue({ $0 }) { try? await open.channel.close() }
    }
}

/// A page's answers as they come, on the connection's event loop only.
private final class PageOfStreams: @unchecked Sendable {
    private var results: [Result<UpstreamClient.Answer, any Error>?]
    private var answers: [EventLoopPromise<UpstreamClient.Answer>?]
    private var next = 0
    private var done = 0
    private var expired = false
    private let loop: any EventLoop
    let all: EventLoopPromise<[Result<UpstreamClient.Answer, any Error>]>

    init(count: Int, loop: any EventLoop) {
        results = Array(repeating: nil, count: count)
        answers = Array(repeating: nil, count: count)
        self.loop = loop
        all = loop.makePromise()
        if count == 0 { all.succeed([]) }
    }

    func started(_ index: Int, _ answer: EventLoopPromise<UpstreamClient.Answer>) {
        loop.preconditionInEventLoop()
        answers[index] = answer
    }

    /// The page's time is up: nothing more starts, and what is unanswered fails.
    func expire(_ error: any Error) {
        loop.preconditionInEventLoop()
        expired = true
        while next < results.count { _ = complete(take(), with: .failure(error)) }
        for (index, answer) in answers.enumerated() where results[index] == nil { answer?.fail(error) }
    }

    /// The next index to start.
    func take() -> Int {
        loop.preconditionInEventLoop()
        defer { next += 1 }
        return next
    }

    /// Records one answer; returns the next index to start, if any is left.
    func complete(_ index: Int, with result: Result<UpstreamClient.Answer, any Error>) -> Int? {
        loop.preconditionInEventLoop()
        guard results[index] == nil else { return nil }
        results[index] = result
        done += 1
        if done == results.count { all.succeed(results.map { $0! }) }
        return !expired && next < results.count ? take() : nil
    }
}

/// One request and its answer on a stream of its own.
private final class OneExchange: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTP2Frame.FramePayload
    typealias OutboundOut = HTTP2Frame.FramePayload

    private let head: HPACKHeaders
    private let body: [UInt8]
    private let answer: EventLoopPromise<UpstreamClient.Answer>
    private var status: Int?
    private var retryAfter: Int?
    private var received: [UInt8] = []
    private var finished = false

    init(head: HPACKHeaders, body: [UInt8], answer: EventLoopPromise<UpstreamClient.Answer>) {
        self.head = head
        self.body = body
        self.answer = answer
    }

    func handlerAdded(context: ChannelHandlerContext) {
        var headers = head
        headers.add(name: "content-length", value: String(body.count))
        context.write(wrapOutboundOut(.headers(.init(headers: headers))), promise: nil)
        var buffer = context.channel.allocator.buffer(capacity: body.count)
        buffer.writeBytes(body)
        context.writeAndFlush(wrapOutboundOut(.data(.init(data: .byteBuffer(buffer), endStream: true))), promise: nil)
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .headers(let frame):
            if status == nil, let code = frame.headers.first(name: ":status").flatMap(Int.init) {
                // An interim 1xx answer is followed by the real one.
                if code >= 200 { status = code }
                retryAfter = frame.headers.first(name: "retry-after").flatMap { Int($0) }
                    .map { min(max(0, $0), UpstreamClient.maximumRetryAfter) }
            }
            if frame.endStream { finish(context) }
        case .data(let frame):
            if case .byteBuffer(let buffer) = frame.data {
                guard received.count + buffer.readableBytes <= UpstreamClient.maximumAnswerBytes else {
                    fail(context, ChannelError.inputClosed)
                    return
                }
                received += buffer.readableBytesView
            }
            if frame.endStream { finish(context) }
        case .rstStream:
            // Answered and reset (the rest of the request unread): the answer stands.
            if status != nil { finish(context) } else { fail(context, ChannelError.eof) }
        default:
            break
        }
    }

    func channelInactive(context: ChannelHandlerContext) {
        if status != nil { finish(context) } else { fail(context, ChannelError.eof) }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        fail(context, error)
    }

    private func finish(_ context: ChannelHandlerContext) {
        guard !finished, let status else { return }
        finished = true
        answer.succeed(UpstreamClient.Answer(status: status, retryAfter: retryAfter, body: received))
    }

    private func fail(_ context: ChannelHandlerContext, _ error: any Error) {
        guard !finished else { return }
        finished = true
        answer.fail(error)
        context.close(promise: nil)
    }
}
