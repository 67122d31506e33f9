import Delivery
import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import Outbound

/// The fan-out path to an `https` upstream: one TLS connection speaking HTTP/2 (ALPN `h2`, as FCM
/// and every proxy in front of it do), on which a window of requests runs as streams. The streams
/// are frames written by one handler on the connection (`StreamExchanges`), not a channel each,
/// and what a turn of the event loop wrote goes out in one flush: a delivery costs a few frames
/// and a share of one TLS record and one system call, which is what lets one connection keep up
/// with what an upstream answers.
///
/// A page is split across lanes: one connection per event-loop thread (at most
/// `maximumLanes`), so that while one thread reads answers and writes requests on its
/// connection, the upstream works on the other's, and neither side waits for the other.
///
/// Bounded like every client of the relay: TLS verified against the system's trust store (plus
/// `--relay-ca-file`), a connect timeout, answers cut at `UpstreamClient.maximumAnswerBytes`,
/// header lists at NIOHTTP2's default bound, and each page under the worker's deadline.
final class HTTP2Upstream: Sendable {
    private let host: String
    private let port: Int
    /// `:authority`: the host (an IPv6 address in brackets), and the port unless it is 443.
    private let authority: String
    private let tls: NIOSSLContext
    /// Each lane's connection, by lane.
    private let connections = NIOLockedValueBox<[Int: Connection]>([:])
    /// The event loop of each lane.
    private let lanes: [any EventLoop]
    /// The name's addresses: the system's, unless a test gives its own.
    private let resolve: DualStackConnector.Resolve?

    private struct Connection: Sendable {
        let channel: any Channel
        let exchanges: StreamExchanges
    }

    /// Takes one request's answer (or the error that left it without one) by its position.
    typealias Answered = @Sendable (_ index: Int, _ answer: Result<UpstreamClient.Answer, any Error>) -> Void

    /// How many times a request the upstream did not process (refused streams, a connection that
    /// went away before it was sent) is sent again on a new connection within the same page.
    static let resendRounds = 2
    /// Connections a page is split across, at most.
    static let maximumLanes = 4
    /// The fewest requests that get a lane of their own.
    static let requestsPerLane = 32

    /// `https://host[:port]` only; `nil` for any other upstream (the general client serves it).
    /// - Parameter resolve: the name's addresses, for a test; else the system resolves it.
    init?(upstream: String, caFile: String?, resolve: DualStackConnector.Resolve? = nil) {
        guard let url = URLComponents(string: upstream), url.scheme?.lowercased() == "https", let host = url.host
        else { return nil }
        var configuration = TLSConfiguration.makeClientConfiguration()
        if let caFile { configuration.additionalTrustRoots = [.file(caFile)] }
        configuration.applicationProtocols = ["h2"]
        guard let context = try? NIOSSLContext(configuration: configuration) else { return nil }
        self.host = host
        port = url.port ?? 443
        let name = host.contains(":") ? "[\(host)]" : host
        authority = port == 443 ? name : "\(name):\(port)"
        tls = context
        self.resolve = resolve
        lanes = Array(MultiThreadedEventLoopGroup.singleton.makeIterator().prefix(Self.maximumLanes))
    }

    /// Posts every body to `path` with `headers`, at most `window` at a time, all within `timeout`:
    /// past it, what is unanswered fails and the connection (stalled, or half open) is closed.
    /// A request the upstream says it never processed (a `GOAWAY` or `REFUSED_STREAM`, as servers
    /// send when they recycle a connection) goes again on a new connection.
    /// - Returns: each body's answer, in order, or the error that left it without one.
    /// A request that takes ten times as long as the page's median answer (at least
    /// `PageOfStreams.leastStall`, half a second), once nearly all of its page is answered, is reset and fails as
    /// `Stalled`: one stream the upstream forgot costs its page a moment, not the whole timeout.
    /// - Parameters:
    ///   - gate: asked before each request starts; told when an answer closes the quota.
    ///   - answered: told each body's final answer as soon as it has it (not one about to be sent
    ///     again), from the connection's event loop.
    @discardableResult
    func postAll(
        path: String, authorization: String, bodies: [[UInt8]], window: Int, timeout: Duration, gate: SendGate? = nil,
        answered: Answered? = nil
    ) async -> [Result<UpstreamClient.Answer, any Error>] {
        let head = HPACKHeaders([
            (":method", "POST"), (":scheme", "https"), (":authority", authority),
            (":path", path), ("content-type", "application/json"), ("authorization", authorization),
            ("user-agent", "fcm-registry-relay"),
        ])
        let end = ContinuousClock.now + timeout
        var results = [Result<UpstreamClient.Answer, any Error>?](repeating: nil, count: bodies.count)
        var unsent = Array(bodies.indices)
        for round in 0...Self.resendRounds {
            let left = end - .now
            let final = Self.finalAnswers(answered, at: unsent, resentLater: round < Self.resendRounds)
            let answers: [Result<UpstreamClient.Answer, any Error>]
            if left > .zero {
                answers = await post(
                    head: head, bodies: unsent.map { bodies[$0] }, window: window, timeout: left, gate: gate,
                    answered: final)
            } else {
                answers = unsent.map { _ in .failure(NoAnswerInTime(timeout: timeout)) }
                for (index, answer) in answers.enumerated() { final?(index, answer) }
            }
            var again: [Int] = []
            for (index, answer) in zip(unsent, answers) {
                results[index] = answer
                if round < Self.resendRounds, case .failure(let error) = answer, error is NotProcessed {
                    again.append(index)
                }
            }
            guard !again.isEmpty else { break }
            unsent = again
        }
        return results.map { $0! }
    }

    /// `answered` for a part of the bodies (at `positions`), told nothing of a request that will be
    /// sent again in a later round.
    private static func finalAnswers(_ answered: Answered?, at positions: [Int], resentLater: Bool) -> Answered? {
        guard let answered else { return nil }
        return { index, answer in
            if resentLater, case .failure(let error) = answer, error is NotProcessed { return }
            answered(positions[index], answer)
        }
    }

    /// One round of `postAll`: the bodies dealt out to the lanes in turn (the first to lane 0, the
    /// second to lane 1, …), each lane's part posted on its connection with its share of the
    /// window. Dealt, not cut in blocks, so that the answers come back in about the page's order,
    /// and the engine can record the page's beginning while its end is still out.
    private func post(
        head: HPACKHeaders, bodies: [[UInt8]], window: Int, timeout: Duration, gate: SendGate?, answered: Answered?
    ) async -> [Result<UpstreamClient.Answer, any Error>] {
        let laneCount = max(1, min(lanes.count, bodies.count / Self.requestsPerLane))
        guard laneCount > 1 else {
            return await post(
                head: head, bodies: bodies, lane: 0, window: window, timeout: timeout, gate: gate, answered: answered)
        }
        return await withTaskGroup(of: (Int, [Result<UpstreamClient.Answer, any Error>]).self) { group in
            for lane in 0..<laneCount {
                let positions = Array(stride(from: lane, to: bodies.count, by: laneCount))
                let part = positions.map { bodies[$0] }
                let partAnswered = Self.finalAnswers(answered, at: positions, resentLater: false)
                group.addTask {
                    (
                        lane,
                        await self.post(
                            head: head, bodies: part, lane: lane, window: max(1, window / laneCount), timeout: timeout,
                            gate: gate, answered: partAnswered)
                    )
                }
            }
            var results = [Result<UpstreamClient.Answer, any Error>?](repeating: nil, count: bodies.count)
            for await (lane, answers) in group {
                for (turn, answer) in answers.enumerated() { results[lane + turn * laneCount] = answer }
            }
            return results.map { $0! }
        }
    }

    /// A part of a page on one lane's connection.
    private func post(
        head: HPACKHeaders, bodies: [[UInt8]], lane: Int, window: Int, timeout: Duration, gate: SendGate?,
        answered: Answered?
    ) async -> [Result<UpstreamClient.Answer, any Error>] {
        let open: Connection
        do {
            open = try await connected(lane: lane)
        } catch {
            let failed = bodies.map { _ in Result<UpstreamClient.Answer, any Error>.failure(error) }
            for (index, answer) in failed.enumerated() { answered?(index, answer) }
            return failed
        }
        let loop = open.channel.eventLoop
        let page = PageOfStreams(head: head, bodies: bodies, loop: loop, gate: gate, answered: answered)
        let channel = open.channel
        let exchanges = open.exchanges
        loop.execute {
            let deadline = loop.scheduleTask(in: TimeAmount(timeout)) {
                page.expire(NoAnswerInTime(timeout: timeout))
                channel.close(promise: nil)
            }
            page.all.futureResult.whenComplete { _ in deadline.cancel() }
            exchanges.run(page, window: window)
        }
        // Cancelled (the server stops, or the page's deadline passed): what is unanswered ends now,
        // as at the page's own deadline, rather than holding the worker until it.
        let finished = await withTaskCancellationHandler {
            try? await page.all.futureResult.get()
        } onCancel: {
            loop.execute {
                page.expire(CancelledPage())
                channel.close(promise: nil)
            }
        }
        let results: [Result<UpstreamClient.Answer, any Error>]
        if let all = finished {
            results = all
        } else {
            results = bodies.map { _ in .failure(ChannelError.ioOnClosedChannel) }
            for (index, answer) in results.enumerated() { answered?(index, answer) }
        }
        if results.contains(where: { if case .failure = $0 { true } else { false } }) {
            dropIfClosed(open.channel, lane: lane)
        }
        return results
    }

    /// The open connection, or a new one.
    private func connected(lane: Int) async throws -> Connection {
        if let open = connections.withLockedValue({ $0[lane] }), open.channel.isActive, !open.exchanges.isRetiring {
            return open
        }
        let tls = tls
        let host = host
        // An IP address is no server name: TLS sends none (SNI), and the certificate must name the address.
        let isAddress = (try? SocketAddress(ipAddress: host, port: port)) != nil
        // Every address of the name is raced (RFC 8305), each attempt on a channel of its own with
        // a pipeline of its own: the winner's `StreamExchanges` is the connection's. The whole
        // pipeline is in place before the connection is: the upstream's first SETTINGS may arrive
        // as soon as TLS is up, and a frame read before HTTP/2 was there would be lost.
        let (channel, exchanges) = try await DualStackConnector.connect(
            host: host, port: port, resolve: isAddress ? nil : resolve, on: lanes[lane % lanes.count],
            timeout: .seconds(10)
        ) { channel in
            let exchanges = StreamExchanges()
            // Header blocks are not validated: ours are fixed and well formed, and of an
            // answer only `:status` and `retry-after` are read (HPACK still bounds its size).
            var connection = NIOHTTP2Handler.ConnectionConfiguration()
            connection.headerBlockValidation = .disabled
            // NIOHTTP2's limits on resets and stream errors guard a server from a client
            // that opens and resets streams to waste its work; here it is the upstream
            // that resets (a proxy's RST_STREAM(NO_ERROR) after each answer is enough to
            // pass 200 in 30 s), and the cost is ours to bear, not to end the connection over.
            var streams = NIOHTTP2Handler.StreamConfiguration()
            streams.streamResetFrameRateLimit.maximumCount = 1 << 30
            streams.streamErrorRateLimit.maximumCount = 1 << 30
            try channel.pipeline.syncOperations.addHandlers(
                NIOSSLClientHandler(context: tls, serverHostname: isAddress ? nil : host),
                NIOHTTP2Handler(
                    mode: .client, frameDelegate: exchanges, connectionConfiguration: connection,
                    streamConfiguration: streams),
                exchanges)
            return exchanges
        }
        let made = Connection(channel: channel, exchanges: exchanges)
        // Two pages may connect at once: the first live connection stays, the other is closed.
        let (kept, closing) = connections.withLockedValue { all -> (Connection, (any Channel)?) in
            if let current = all[lane], current.channel.isActive, !current.exchanges.isRetiring {
                return (current, made.channel)
            }
            // A retiring connection closes itself once its streams are done.
            let stale = all[lane].flatMap { $0.exchanges.isRetiring ? nil : $0.channel }
            all[lane] = made
            return (made, stale)
        }
        closing?.close(promise: nil)
        return kept
    }

    private func dropIfClosed(_ channel: any Channel, lane: Int) {
        guard !channel.isActive else { return }
        connections.withLockedValue { all in
            if all[lane]?.channel === channel { all[lane] = nil }
        }
    }

    func shutdown() async {
        for open in connections.withLockedValue({ Array($0.values) }) { try? await open.channel.close() }
    }
}

/// A request the upstream did not process: its stream was refused (`REFUSED_STREAM`, or above a
/// `GOAWAY`'s last stream), or it was never sent because the connection was going away. RFC 9113
/// §8.7: such a request may be sent again as it is.
struct NotProcessed: Error, CustomStringConvertible {
    var description: String { "the upstream did not process the request (its connection was going away)" }
}

/// A request that never started: the quota closed first. It was not sent, so it costs the
/// recipient no attempt.
struct NotSent: Error, CustomStringConvertible {
    var description: String { "not sent: the project's quota closed first" }
}

/// A request left unanswered far longer than the rest of its page: reset, to be tried again.
struct Stalled: Error, CustomStringConvertible {
    var after: Duration
    var description: String { "no answer within \(after), while the rest of its page was answered" }
}

/// A page's requests and their answers as they come, on the connection's event loop only.
final class PageOfStreams: @unchecked Sendable {
    let head: HPACKHeaders
    let bodies: [[UInt8]]
    let gate: SendGate?
    /// Told each answer as it comes.
    let answered: HTTP2Upstream.Answered?
    private var results: [Result<UpstreamClient.Answer, any Error>?]
    private var next = 0
    private var done = 0
    private var expired = false
    /// The quota closed: nothing more starts.
    private(set) var halted = false
    /// How long each answered request took, for what counts as a stall.
    private var answerTimes: [Duration] = []
    private let loop: any EventLoop
    let all: EventLoopPromise<[Result<UpstreamClient.Answer, any Error>]>

    /// The least a request waits, once its page is nearly all answered, before it counts as stalled.
    static let leastStall: Duration = .milliseconds(500)
    /// A stall is this many times the page's median answer time.
    static let stallFactor = 10

    init(
        head: HPACKHeaders, bodies: [[UInt8]], loop: any EventLoop, gate: SendGate? = nil,
        answered: HTTP2Upstream.Answered? = nil
    ) {
        self.head = head
        self.bodies = bodies
        self.gate = gate
        self.answered = answered
        results = Array(repeating: nil, count: bodies.count)
        self.loop = loop
        all = loop.makePromise()
        if bodies.isEmpty { all.succeed([]) }
    }

    var count: Int { bodies.count }

    /// The page's time is up: nothing more starts, and what is unanswered fails.
    func expire(_ error: any Error) {
        loop.preconditionInEventLoop()
        expired = true
        for index in results.indices where results[index] == nil { _ = complete(index, with: .failure(error)) }
    }

    /// Whether a request may start now; when not, the page stops starting any (the quota closed).
    func mayStart() -> Bool {
        if !halted, gate?.isClosed() == true { halted = true }
        return !halted
    }

    /// An answer closed the quota: no request of the page starts after it.
    func quotaClosed(retryAfter: Int?) {
        halted = true
        gate?.quotaClosed(retryAfter)
    }

    /// The next index to start.
    func take() -> Int {
        loop.preconditionInEventLoop()
        defer { next += 1 }
        return next
    }

    /// Records one answer; returns the next index to start, if any is left. Once the page is
    /// halted, the requests not started yet end as `NotSent`.
    func complete(_ index: Int, with result: Result<UpstreamClient.Answer, any Error>, took: Duration? = nil) -> Int? {
        loop.preconditionInEventLoop()
        guard results[index] == nil else { return nil }
        results[index] = result
        done += 1
        answered?(index, result)
        // Only answers tell how long the upstream takes; a 429 comes back at once and says nothing of it.
        if let took, case .success(let answer) = result, answer.status != 429 { answerTimes.append(took) }
        if halted {
            while next < results.count {
                let skipped = take()
                results[skipped] = .failure(NotSent())
                done += 1
                answered?(skipped, .failure(NotSent()))
            }
        }
        if done == results.count { all.succeed(results.map { $0! }) }
        return !expired && next < results.count ? take() : nil
    }

    /// How long a request of this page may go unanswered before it counts as stalled: `nil` while
    /// too little of the page is answered to tell a stall from a slow upstream.
    func stallLimit() -> Duration? {
        loop.preconditionInEventLoop()
        // A halted page's requests in flight are not stalled: they wait behind the quota's answer.
        guard !halted, !answerTimes.isEmpty, answerTimes.count >= count - max(1, count / 10) else { return nil }
        answerTimes.sort()
        return max(Self.leastStall, answerTimes[answerTimes.count / 2] * Self.stallFactor)
    }
}

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
        /// The answer's body when it is an error (FCM's error code is in it), at most
        /// `UpstreamClient.maximumAnswerBytes`.
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
    /// the rest of the page is answered, and the worker tries the recipient again at once.
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
        var headers = page.head
        headers.add(name: "content-length", value: String(body.count))
        context.write(wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .headers(.init(headers: headers)))), promise: nil)
        let written = context.eventLoop.makePromise(of: Void.self)
        // A request whose end never went out (the connection failed or went away first) was not
        // processed: it may go again as it is. NIOHTTP2 fails the write from inside its handling
        // of the frame that dropped it, so this waits for that frame to have reached us.
        written.futureResult.whenFailure { [self, loop = context.eventLoop] _ in
            loop.execute { [self] in unsent(streamID) }
        }
        let buffer = context.channel.allocator.buffer(bytes: body)
        context.write(
            wrapOutboundOut(HTTP2Frame(streamID: streamID, payload: .data(.init(data: .byteBuffer(buffer), endStream: true)))),
            promise: written)
        unflushed = true
    }

    /// Ends a stream's exchange (once) and starts its page's next request.
    private func end(_ streamID: HTTP2StreamID, with result: Result<UpstreamClient.Answer, any Error>) {
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
                    .map { min(max(0, $0), UpstreamClient.maximumRetryAfter) }
                exchanges[frame.streamID]?.retryAfter = retryAfter
                // The quota closed: no request of the project starts after this answer.
                if code == 429 { exchanges[frame.streamID]?.page.quotaClosed(retryAfter: retryAfter) }
            }
            if headers.endStream { finish(frame.streamID) }
        case .data(let data):
            guard case .byteBuffer(let buffer) = data.data else { break }
            returnWindow(buffer.readableBytes + (data.paddingBytes.map { $0 + 1 } ?? 0))
            guard var exchange = exchanges[frame.streamID] else { break }
            // A success is read by its status alone: only an error's body (FCM's error code) is
            // kept, and only its beginning.
            if !(200..<300).contains(exchange.status ?? 0), exchange.read == exchange.received.count,
                exchange.received.count + buffer.readableBytes <= UpstreamClient.maximumAnswerBytes
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
                context.write(wrapOutboundOut(HTTP2Frame(streamID: frame.streamID, payload: .rstStream(.cancel))), promise: nil)
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
    /// again by the worker), and the next page opens a new connection.
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
            wrapOutboundOut(HTTP2Frame(streamID: .rootStream, payload: .windowUpdate(windowSizeIncrement: unreturnedBytes))),
            promise: nil)
        unreturnedBytes = 0
        unflushed = true
    }
}

/// A page's requests were cancelled before the upstream answered: the server is stopping, or the
/// worker gave up on the page. The recipients stay pending.
struct CancelledPage: Error, CustomStringConvertible {
    var description: String { "cancelled before the upstream answered" }
}

/// A page's time ran out before the upstream answered.
struct NoAnswerInTime: Error, CustomStringConvertible {
    var timeout: Duration
    var description: String { "no answer from the upstream within \(timeout)" }
}

/// The upstream reset a stream before it answered.
struct StreamReset: Error, CustomStringConvertible {
    var reason: HTTP2ErrorCode?
    var description: String { "the upstream reset the stream (\(reason.map { "\($0)" } ?? "no reason"))" }
}
