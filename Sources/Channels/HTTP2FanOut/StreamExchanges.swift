import NIOConcurrencyHelpers
import NIOCore
import NIOHPACK
import NIOHTTP2

/// The requests of every page on one HTTP/2 connection, as frames: it names each stream, writes
/// its `HEADERS` and `DATA`, reads its answer, and starts the page's next request when one ends.
/// It sits after `NIOHTTP2Handler` without a stream multiplexer, so it also returns the
/// connection's receive window (`WINDOW_UPDATE` on stream 0) as answers are read; a stream's own
/// window is never returned, which bounds an answer at 65,535 bytes.
final class StreamExchanges: ChannelInboundHandler, NIOHTTP2FrameDelegate, @unchecked Sendable {
    typealias InboundIn = HTTP2Frame
    typealias OutboundOut = HTTP2Frame

    private struct Exchange {
        let page: PageOfStreams
        let index: Int
        let startedAt: NIODeadline
        var status: Int?
        var retryAfter: Int?
        /// The answer's body when it is an error (where the upstream says why: FCM's error code,
        /// APNs's reason), at most
        /// `UpstreamAnswer.maximumBodyBytes`.
        var received: [UInt8] = []
        /// Every answer byte read, kept or not.
        var read = 0
    }

    private var context: ChannelHandlerContext?
    private var exchanges: [HTTP2StreamID: Exchange] = [:]
    /// The streams NIOHTTP2 holds for us: from their first frame until it reports them closed (or
    /// their frames failed). An exchange may end before (a `GOAWAY` refused it); the stream still
    /// counts against the upstream's limit until NIOHTTP2 lets it go.
    private var live = Set<HTTP2StreamID>()
    /// Requests ready to start; started one at a time, so that a connection failing each at once
    /// does not recurse through the page.
    private var ready = CircularBuffer<(page: PageOfStreams, index: Int)>()
    private var starting = false
    /// The upstream's `SETTINGS_MAX_CONCURRENT_STREAMS`: streams past it wait here, in `ready`,
    /// rather than in NIOHTTP2's buffer. Until its first SETTINGS, the protocol's suggested 100.
    private var streamLimit = 100
    private var nextStreamID = 1
    private var unflushed = false
    private var flushScheduled = false
    /// Connection-window bytes read since the last `WINDOW_UPDATE`.
    private var unreturnedBytes = 0
    /// Why nothing more starts here: the connection closed or failed.
    private var closedBy: (any Error)?
    private var goneAway = false
    /// NIOHTTP2 wrote a `GOAWAY`: it met a connection error, and the connection is done.
    private var wroteGoAway = false
    private let retiring = NIOLockedValueBox(false)

    /// Client stream identifiers are odd and never reused: past this one the connection is retired
    /// (new pages go to a new connection) with room left for the pages already on it.
    static let retireAfterStreamID = Int(Int32.max) - 2 * (1 << 22)
    /// A stream's receive window, never returned: the most an answer can be.
    static let streamWindow = 65_535
    /// Returning the connection window in steps of half its initial size.
    static let windowReturnStep = 32_768

    /// True once no new page should start here: the upstream sent `GOAWAY`, the connection
    /// failed, or its stream identifiers are nearly spent.
    var isRetiring: Bool { retiring.withLockedValue { $0 } }

    /// Looks for stalled streams while the connection lives.
    private var stallWatch: RepeatedTask?
    static let stallWatchInterval = TimeAmount.milliseconds(50)

    func handlerAdded(context: ChannelHandlerContext) {
        self.context = context
        stallWatch = context.eventLoop.scheduleRepeatedTask(
            initialDelay: Self.stallWatchInterval, delay: Self.stallWatchInterval
        ) { [self] _ in resetStalled() }
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        stallWatch?.cancel()
        stallWatch = nil
        self.context = nil
    }

    /// Resets each stream left unanswered past its page's stall limit, and ends it as `Stalled`:
    /// the rest of the page is answered, and the caller may try the request again at once.
    private func resetStalled() {
        guard !exchanges.isEmpty, let context else { return }
        let now = NIODeadline.now()
        var limits: [ObjectIdentifier: Duration?] = [:]
        var stalled: [(HTTP2StreamID, Duration)] = []
        for (streamID, exchange) in exchanges where exchange.status == nil {
            let key = ObjectIdentifier(exchange.page)
            let limit = limits[key] ?? exchange.page.stallLimit()
            limits[key] = limit
            guard let limit, now - exchange.startedAt > TimeAmount(limit) else { continue }
            stalled.append((streamID, limit))
        }
        for (streamID, limit) in stalled {
            context.write(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .rstStream(.cancel))), promise: nil)
            unflushed = true
            end(streamID, with: .failure(Stalled(after: limit)))
        }
        if !stalled.isEmpty { flush() }
    }

    /// Starts `page`, `window` requests at a time.
    func run(_ page: PageOfStreams, window: Int) {
        for _ in 0..<min(max(1, window), page.count) { ready.append((page, page.take())) }
        startReady()
    }

    private func startReady() {
        guard !starting else { return }
        starting = true
        defer { starting = false }
        // A stream starts only when the upstream allows another and the connection can take its
        // bytes: otherwise NIOHTTP2 would hold it in a buffer of its own, out of our sight (and
        // write it after a `GOAWAY`, which ends the connection).
        while closedBy != nil || goneAway || (live.count < streamLimit && context?.channel.isWritable == true),
            let (page, index) = ready.popFirst()
        {
            start(index, of: page)
        }
        scheduleFlush()
    }

    private func start(_ index: Int, of page: PageOfStreams) {
        guard page.mayStart() else {
            if let next = page.complete(index, with: .failure(NotSent())) { ready.append((page, next)) }
            return
        }
        guard let context, closedBy == nil, !goneAway, nextStreamID <= Int(Int32.max) else {
            if let next = page.complete(index, with: .failure(NotProcessed())) { ready.append((page, next)) }
            return
        }
        let streamID = HTTP2StreamID(nextStreamID)
        nextStreamID += 2
        if nextStreamID > Self.retireAfterStreamID { retire() }
        exchanges[streamID] = Exchange(page: page, index: index, startedAt: .now())
        live.insert(streamID)
        let body = page.bodies[index]
        var headers = page.headers(of: index)
        headers.add(name: "content-length", value: String(body.count))
        context.write(
            wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers)))), promise: nil)
        let written = context.eventLoop.makePromise(of: Void.self)
        // A request whose end never went out (the connection failed or went away first) was not
        // processed: it may go again as it is. NIOHTTP2 fails the write from inside its handling
        // of the frame that dropped it, so this waits for that frame to have reached us.
        written.futureResult.whenFailure { [self, loop = context.eventLoop] _ in
            loop.execute { [self] in unsent(streamID) }
        }
        let buffer = context.channel.allocator.buffer(bytes: body)
        context.write(
            wrapOutboundOut(
                HTTP2Frame(streamID: streamID, payload: .data(.init(data: .byteBuffer(buffer), endStream: true)))),
            promise: written)
        unflushed = true
    }

    /// Ends a stream's exchange (once) and starts its page's next request.
    private func end(_ streamID: HTTP2StreamID, with result: Result<UpstreamAnswer, any Error>) {
        guard let exchange = exchanges.removeValue(forKey: streamID) else { return }
        let took = Duration.nanoseconds((NIODeadline.now() - exchange.startedAt).nanoseconds)
        if let next = exchange.page.complete(exchange.index, with: result, took: took) {
            ready.append((exchange.page, next))
        }
        startReady()
        if isRetiring, exchanges.isEmpty { context?.close(promise: nil) }
    }

    /// A stream whose request never fully went out.
    private func unsent(_ streamID: HTTP2StreamID) {
        live.remove(streamID)
        close(streamID, unanswered: NotProcessed())  // answered before the request's end: the answer stands
        startReady()
    }

    /// Ends a stream's exchange that will read nothing more: with its answer if its status came,
    /// else with `error`.
    private func close(_ streamID: HTTP2StreamID, unanswered error: any Error) {
        if exchanges[streamID]?.status != nil { finish(streamID) } else { end(streamID, with: .failure(error)) }
    }

    private func finish(_ streamID: HTTP2StreamID) {
        guard let exchange = exchanges[streamID], let status = exchange.status else { return }
        end(streamID, with: .success(.init(status: status, retryAfter: exchange.retryAfter, body: exchange.received)))
    }

    private func retire() {
        retiring.withLockedValue { $0 = true }
    }

    /// What a turn of the event loop wrote goes out at its end, in one flush.
    private func scheduleFlush() {
        guard unflushed, !flushScheduled, let context else { return }
        flushScheduled = true
        context.eventLoop.execute { [self] in
            flushScheduled = false
            flush()
        }
    }

    private func flush() {
        guard unflushed, let context else { return }
        unflushed = false
        context.flush()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        let frame = unwrapInboundIn(data)
        switch frame.payload {
        case .headers(let headers):
            if exchanges[frame.streamID]?.status == nil,
                let code = headers.headers.first(name: ":status").flatMap(Int.init)
            {
                // An interim 1xx answer is followed by the real one.
                if code >= 200 { exchanges[frame.streamID]?.status = code }
                let retryAfter = headers.headers.first(name: "retry-after").flatMap { Int($0) }
                    .map { min(max(0, $0), UpstreamAnswer.maximumRetryAfter) }
                exchanges[frame.streamID]?.retryAfter = retryAfter
                // The quota closed: no request of the page (nor of its gate's other pages) starts after this answer.
                if code == 429 { exchanges[frame.streamID]?.page.quotaClosed(retryAfter: retryAfter) }
            }
            if headers.endStream { finish(frame.streamID) }
        case .data(let data):
            guard case .byteBuffer(let buffer) = data.data else { break }
            returnWindow(buffer.readableBytes + (data.paddingBytes.map { $0 + 1 } ?? 0))
            guard var exchange = exchanges[frame.streamID] else { break }
            // A success is read by its status alone: only an error's body (the upstream's reason) is
            // kept, and only its beginning.
            if !(200..<300).contains(exchange.status ?? 0), exchange.read == exchange.received.count,
                exchange.received.count + buffer.readableBytes <= UpstreamAnswer.maximumBodyBytes
            {
                exchange.received += buffer.readableBytesView
            }
            exchange.read += buffer.readableBytes
            exchanges[frame.streamID] = exchange
            if data.endStream {
                finish(frame.streamID)
            } else if exchange.read >= Self.streamWindow {
                // The stream's window is never returned, so an answer this long would stall until
                // the page's deadline: it is cut here, and read by what came of it.
                context.write(
                    wrapOutboundOut(HTTP2Frame(streamID: frame.streamID, payload: .rstStream(.cancel))), promise: nil)
                unflushed = true
                finish(frame.streamID)
            }
        case .settings(.settings(let settings)):
            if let limit = settings.last(where: { $0.parameter == .maxConcurrentStreams }) {
                streamLimit = max(1, limit.value)
                startReady()
            }
        case .goAway(let last, _, _):
            // The upstream takes no new stream here, and did not process those above its last
            // one: they go again on a new connection. (NIOHTTP2 reports them closed only after
            // this frame, and as cancelled.)
            goneAway = true
            retire()
            for streamID in exchanges.keys.sorted() where streamID > last && exchanges[streamID]?.status == nil {
                end(streamID, with: .failure(NotProcessed()))
            }
            if exchanges.isEmpty { context.close(promise: nil) }
        default:
            break
        }
    }

    func channelReadComplete(context: ChannelHandlerContext) {
        flush()
        context.fireChannelReadComplete()
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let closed = event as? StreamClosedEvent {
            live.remove(closed.streamID)
            // Answered, then reset (the rest of the request unread): the answer stands.
            close(
                closed.streamID,
                unanswered: closed.reason == .refusedStream ? NotProcessed() : StreamReset(reason: closed.reason))
            startReady()
        }
        context.fireUserInboundEventTriggered(event)
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        if context.channel.isWritable { startReady() }
        context.fireChannelWritabilityChanged()
    }

    /// Tells a connection error (NIOHTTP2 answers one with a `GOAWAY`) from a stream's.
    func wroteFrame(_ frame: HTTP2Frame) {
        if case .goAway = frame.payload { wroteGoAway = true }
    }

    func channelInactive(context: ChannelHandlerContext) {
        fail(ChannelError.eof)
        context.fireChannelInactive()
    }

    /// An error of one stream (NIOHTTP2 resets it, and reports it closed) ends that stream only.
    /// Any other error ends the connection: the requests without an answer fail (and are tried
    /// again by the caller), and the next page opens a new connection.
    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if error is any NIOHTTP2Error, !wroteGoAway { return }
        fail(error)
        context.close(promise: nil)
    }

    private func fail(_ error: any Error) {
        retire()
        if closedBy == nil { closedBy = error }
        for streamID in Array(exchanges.keys) { close(streamID, unanswered: error) }
        startReady()  // what waited for a stream fails too
    }

    /// Returns read bytes to the connection's receive window, half a window at a time.
    private func returnWindow(_ bytes: Int) {
        guard let context, bytes > 0 else { return }
        unreturnedBytes += bytes
        guard unreturnedBytes >= Self.windowReturnStep else { return }
        context.write(
            wrapOutboundOut(
                HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: unreturnedBytes))),
            promise: nil)
        unreturnedBytes = 0
        unflushed = true
    }
}
