import HTTPTypes
import Logging
import NIOCore
import NIOHTTPTypes
import Synchronization

/// Deadlines on each HTTP/1 connection that Hummingbird's idle timeout does not give: the first
/// request head must arrive within `headerTimeout` of connecting, and every body within
/// `bodyTimeout` of its head (a client trickling one body byte at a time resets the idle timer).
/// Between requests on a kept-alive connection the idle timeout governs: header bytes do not
/// reset it, so a head trickled after an answer is bounded by it. A connection that misses a
/// deadline is closed and the reason logged.
///
/// It also ends a connection whose answer went out before its request body was read (a 401, 404
/// or 413 answered early): the server would otherwise read, and throw away, whatever the client
/// goes on sending. The answer is flushed first, then the connection closed.
///
/// On a listener whose connections it guards one each, it tells `silent` when the connection
/// falls silent (opened, or answered and kept alive) and when it speaks or closes. On the TLS
/// listener it tells the connection's ``FirstRequestDeadline`` that a request has begun.
public final class ConnectionGuard: ChannelDuplexHandler, RemovableChannelHandler {
    public typealias InboundIn = HTTPRequestPart
    public typealias InboundOut = HTTPRequestPart
    public typealias OutboundIn = HTTPResponsePart
    public typealias OutboundOut = HTTPResponsePart

    private let headerTimeout: TimeAmount
    private let bodyTimeout: TimeAmount
    private let logger: Logger
    /// Shared by the listener's connections: one line per interval, however many miss a deadline.
    private let slowLog: LogThrottle
    private let silent: SilentConnections?
    /// Whether a ``FirstRequestDeadline`` waits for this connection's (or stream's) first head.
    private var announcesFirstRequest: Bool
    private var timer: Scheduled<Void>?
    /// Whether the request read last has been read to its end.
    private var requestComplete = true
    private var discarding = false
    /// Requests whose head has arrived and whose answer has not been written yet: more than one
    /// when a client sends its next request before reading the answer to the last (pipelining).
    private var unanswered = 0
    /// The same, counted until each answer has gone out rather than when it is written.
    private var inFlight = 0

    public init(
        headerTimeout: Duration, bodyTimeout: Duration, slowLog: LogThrottle, silent: SilentConnections? = nil,
        announcesFirstRequest: Bool = false, logger: Logger
    ) {
        self.headerTimeout = TimeAmount(headerTimeout)
        self.bodyTimeout = TimeAmount(bodyTimeout)
        self.slowLog = slowLog
        self.silent = silent
        self.announcesFirstRequest = announcesFirstRequest
        self.logger = logger
    }

    private func arm(_ context: ChannelHandlerContext, _ timeout: TimeAmount, _ reason: ClosedBecause) {
        timer?.cancel()
        timer = reason.close(context, after: timeout, log: slowLog, logger: logger)
    }

    private func disarm() {
        timer?.cancel()
        timer = nil
    }

    public func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive {
            arm(context, headerTimeout, .headerTimeout)
            silent?.fellSilent(context.channel)
        }
    }

    public func channelActive(context: ChannelHandlerContext) {
        arm(context, headerTimeout, .headerTimeout)
        silent?.fellSilent(context.channel)
        context.fireChannelActive()
    }

    public func channelInactive(context: ChannelHandlerContext) {
        disarm()
        silent?.spoke(context.channel)
        context.fireChannelInactive()
    }

    public func handlerRemoved(context: ChannelHandlerContext) {
        disarm()
        silent?.spoke(context.channel)
    }

    public func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if discarding { return }
        switch unwrapInboundIn(data) {
        case .head:
            requestComplete = false
            unanswered += 1
            inFlight += 1
            silent?.spoke(context.channel)
            if announcesFirstRequest {
                announcesFirstRequest = false
                FirstRequestDeadline.requestArrived(on: context.channel)
            }
            arm(context, bodyTimeout, .bodyTimeout)
        case .body:
            break
        case .end:
            requestComplete = true
            disarm()
        }
        context.fireChannelRead(data)
    }

    public func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .end = unwrapOutboundIn(data) else {
            context.write(data, promise: promise)
            return
        }
        unanswered = max(0, unanswered - 1)
        // The answer is early only if it answers the request still being read: with a pipelined
        // request behind it, the one answered was read whole.
        if requestComplete || unanswered > 0 {
            guard let silent else {
                context.write(data, promise: promise)
                return
            }
            // Once the answer is out, and unless another request has begun meanwhile, a
            // kept-alive connection waits, silent, for its next request.
            let written = context.eventLoop.makePromise(of: Void.self)
            written.futureResult.cascade(to: promise)
            let bound = NIOLoopBound(self, eventLoop: context.eventLoop)
            let channel = context.channel
            written.futureResult.whenComplete { _ in
                let handler = bound.value
                handler.inFlight = max(0, handler.inFlight - 1)
                if handler.inFlight == 0, channel.isActive { silent.fellSilent(channel) }
            }
            context.write(data, promise: written)
        } else {
            // Answered before the body was read: send the answer and stop reading instead of
            // draining what the client goes on sending. The write side is shut first, so the
            // client reads the answer and an end of stream; the connection is closed a moment
            // later (closing at once, with unread bytes, would reset it and lose the answer).
            discarding = true
            disarm()
            ClosedBecause.answeredEarly.count()
            let bound = context.loopBound
            let answer = {
                bound.value.writeAndFlush(data).always { _ in
                    bound.value.close(mode: .output, promise: nil)
                    bound.value.eventLoop.assumeIsolated().scheduleTask(in: Self.linger) {
                        bound.value.close(promise: nil)
                    }
                }.cascade(to: promise)
            }
            // A peer answered early many times a second is one reconnecting to push bodies nobody
            // reads: its next answers wait, and it waits with them instead of reconnecting.
            if EarlyAnswers.shared.isFlooding(context.channel.remoteAddress) {
                context.eventLoop.assumeIsolated().scheduleTask(in: Self.tarpit) { answer() }
            } else {
                answer()
            }
        }
    }

    /// How long an early answer to a flooding peer is held back.
    static let tarpit = TimeAmount.seconds(1)

    /// How long a connection answered early stays half-open for the client to read the answer.
    static let linger = TimeAmount.seconds(1)

    /// Once answered early, the connection reads nothing more.
    public func read(context: ChannelHandlerContext) {
        if !discarding { context.read() }
    }
}
