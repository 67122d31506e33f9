import Foundation
import NIOConcurrencyHelpers
import NIOCore
import NIOHPACK
import NIOHTTP2
import NIOPosix
import NIOSSL
import Outbound

/// The fan-out path to an `https` upstream, for any channel that posts one request per recipient
/// (FCM HTTP v1, APNs, Web Push): one TLS connection speaking HTTP/2 (ALPN `h2`, as FCM, APNs and
/// every proxy in front of them do), on which a window of requests runs as streams. The streams
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
/// `--relay-ca-file`), a connect timeout, answers cut at `UpstreamAnswer.maximumBodyBytes`,
/// header lists at NIOHTTP2's default bound, and each page under its caller's deadline.
///
/// It knows no channel: the caller names the path, the headers and the bodies, and reads the
/// answers (`UpstreamAnswer`) by its own upstream's words.
public final class HTTP2Upstream: Sendable {
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
    public typealias Answered = @Sendable (_ index: Int, _ answer: Result<UpstreamAnswer, any Error>) -> Void

    /// How many times a request the upstream did not process (refused streams, a connection that
    /// went away before it was sent) is sent again on a new connection within the same page.
    static let resendRounds = 2
    /// Connections a page is split across, at most.
    static let maximumLanes = 4
    /// The fewest requests that get a lane of their own.
    static let requestsPerLane = 32

    /// `https://host[:port]` only; `nil` for any other upstream (the channel's general client serves it).
    /// - Parameters:
    ///   - caFile: a PEM file of roots trusted beside the system's (`--relay-ca-file`).
    ///   - resolve: the name's addresses, for a test; else the system resolves it.
    public init?(upstream: String, caFile: String?, resolve: DualStackConnector.Resolve? = nil) {
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
    ///   - path: `:path`, the same for every body of the page (FCM's send path, a push service's
    ///     subscription); `postAll(paths:…)` takes one per body.
    ///   - headers: the headers every request of the page carries, after the pseudo-headers the
    ///     fan-out writes (`:method` POST, `:scheme`, `:authority`, `:path`) and before the
    ///     `content-length` it adds to each: a channel's own (FCM's `content-type` and
    ///     `authorization`; APNs's `apns-*`; Web Push's `content-encoding`, `ttl`, `urgency`). Names
    ///     are sent in lower case, as HTTP/2 requires; values as they are.
    ///   - bodies: each request's body, as it goes out.
    ///   - gate: asked before each request starts; told when an answer closes the quota (a 429).
    ///   - answered: told each body's final answer as soon as it has it (not one about to be sent
    ///     again), from the connection's event loop.
    @discardableResult
    public func postAll(
        path: String, headers: [(name: String, value: String)], bodies: [[UInt8]], window: Int, timeout: Duration,
        gate: FanOutGate? = nil, answered: Answered? = nil
    ) async -> [Result<UpstreamAnswer, any Error>] {
        await postAll(
            path: path, paths: nil, headers: headers, bodies: bodies, window: window, timeout: timeout, gate: gate,
            answered: answered)
    }

    /// As `postAll(path:…)`, each body to its own path (`paths[i]` for `bodies[i]`), as APNs names
    /// the device in the path: the page still shares one header list, and each request's `:path`
    /// is written without entering the HPACK table, which it would only churn.
    @discardableResult
    public func postAll(
        paths: [String], headers: [(name: String, value: String)], bodies: [[UInt8]], window: Int, timeout: Duration,
        gate: FanOutGate? = nil, answered: Answered? = nil
    ) async -> [Result<UpstreamAnswer, any Error>] {
        precondition(paths.count == bodies.count, "one path per body")
        return await postAll(
            path: "", paths: paths, headers: headers, bodies: bodies, window: window, timeout: timeout, gate: gate,
            answered: answered)
    }

    private func postAll(
        path: String, paths: [String]?, headers: [(name: String, value: String)], bodies: [[UInt8]], window: Int,
        timeout: Duration, gate: FanOutGate?, answered: Answered?
    ) async -> [Result<UpstreamAnswer, any Error>] {
        // One header list for the page, shared by its requests.
        var head = HPACKHeaders([(":method", "POST"), (":scheme", "https"), (":authority", authority), (":path", path)])
        head.reserveCapacity(head.count + headers.count + 1)
        for (name, value) in headers { head.add(name: name.lowercased(), value: value) }
        let end = ContinuousClock.now + timeout
        var results = [Result<UpstreamAnswer, any Error>?](repeating: nil, count: bodies.count)
        var unsent = Array(bodies.indices)
        for round in 0...Self.resendRounds {
            let left = end - .now
            let final = Self.finalAnswers(answered, at: unsent, resentLater: round < Self.resendRounds)
            let answers: [Result<UpstreamAnswer, any Error>]
            if left > .zero {
                answers = await post(
                    head: head, bodies: unsent.map { bodies[$0] },
                    paths: paths.map { paths in unsent.map { paths[$0] } },
                    window: window, timeout: left, gate: gate, answered: final)
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
        head: HPACKHeaders, bodies: [[UInt8]], paths: [String]?, window: Int, timeout: Duration, gate: FanOutGate?,
        answered: Answered?
    ) async -> [Result<UpstreamAnswer, any Error>] {
        let laneCount = max(1, min(lanes.count, bodies.count / Self.requestsPerLane))
        guard laneCount > 1 else {
            return await post(
                head: head, bodies: bodies, paths: paths, lane: 0, window: window, timeout: timeout, gate: gate,
                answered: answered)
        }
        return await withTaskGroup(of: (Int, [Result<UpstreamAnswer, any Error>]).self) { group in
            for lane in 0..<laneCount {
                let positions = Array(stride(from: lane, to: bodies.count, by: laneCount))
                let part = positions.map { bodies[$0] }
                let partPaths = paths.map { paths in positions.map { paths[$0] } }
                let partAnswered = Self.finalAnswers(answered, at: positions, resentLater: false)
                group.addTask {
                    (
                        lane,
                        await self.post(
                            head: head, bodies: part, paths: partPaths, lane: lane, window: max(1, window / laneCount),
                            timeout: timeout, gate: gate, answered: partAnswered)
                    )
                }
            }
            var results = [Result<UpstreamAnswer, any Error>?](repeating: nil, count: bodies.count)
            for await (lane, answers) in group {
                for (turn, answer) in answers.enumerated() { results[lane + turn * laneCount] = answer }
            }
            return results.map { $0! }
        }
    }

    /// A part of a page on one lane's connection.
    private func post(
        head: HPACKHeaders, bodies: [[UInt8]], paths: [String]?, lane: Int, window: Int, timeout: Duration,
        gate: FanOutGate?, answered: Answered?
    ) async -> [Result<UpstreamAnswer, any Error>] {
        let open: Connection
        do {
            open = try await connected(lane: lane)
        } catch {
            let failed = bodies.map { _ in Result<UpstreamAnswer, any Error>.failure(error) }
            for (index, answer) in failed.enumerated() { answered?(index, answer) }
            return failed
        }
        let loop = open.channel.eventLoop
        let page = PageOfStreams(head: head, bodies: bodies, paths: paths, loop: loop, gate: gate, answered: answered)
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
        let results: [Result<UpstreamAnswer, any Error>]
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
            // Header blocks are not validated: ours are one list per page, its names lower-cased
            // and its values the caller's, and of an answer only `:status` and `retry-after` are
            // read (HPACK still bounds its size).
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

    /// Closes every connection.
    public func shutdown() async {
        for open in connections.withLockedValue({ Array($0.values) }) { try? await open.channel.close() }
    }
}
