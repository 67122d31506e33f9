import HTTPTypes
import Logging
import NIOCore
import NIOHTTPTypes

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
final class ConnectionGuard: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPRequestPart
    typealias InboundOut = HTTPRequestPart
    typealias OutboundIn = HTTPResponsePart
    typealias OutboundOut = HTTPResponsePart

    private let headerTimeout: TimeAmount
    private let bodyTimeout: TimeAmount
    private let logger: Logger
    private var timer: Scheduled<Void>?
    private var requestComplete = true
    private var discarding = false

    init(headerTimeout: Duration, bodyTimeout: Duration, logger: Logger) {
        self.headerTimeout = TimeAmount(headerTimeout)
        self.bodyTimeout = TimeAmount(bodyTimeout)
        self.logger = logger
    }

    private func arm(_ context: ChannelHandlerContext, _ timeout: TimeAmount, _ reason: String) {
        timer?.cancel()
        let bound = context.loopBound
        let logger = logger
        timer = context.eventLoop.assumeIsolated().scheduleTask(in: timeout) {
            logger.notice(
                "closing a slow connection",
                metadata: ["reason": "\(reason)", "peer": "\(bound.value.channel.remoteAddress?.description ?? "?")"])
            bound.value.close(promise: nil)
        }
    }

    private func disarm() {
        timer?.cancel()
        timer = nil
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { arm(context, headerTimeout, "request head not received in time") }
    }

    func channelActive(context: ChannelHandlerContext) {
        arm(context, headerTimeout, "request head not received in time")
        context.fireChannelActive()
    }

    func channelInactive(context: ChannelHandlerContext) {
        disarm()
        context.fireChannelInactive()
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        disarm()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        if discarding { return }
        switch unwrapInboundIn(data) {
        case .head:
            requestComplete = false
            arm(context, bodyTimeout, "request body not received in time")
        case .body:
            break
        case .end:
            requestComplete = true
            disarm()
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .end = unwrapOutboundIn(data) else {
            context.write(data, promise: promise)
            return
        }
        if requestComplete {
            context.write(data, promise: promise)
        } else {
            // Answered before the body was read: send the answer and stop reading instead of
            // draining what the client goes on sending. The write side is shut first, so the
            // client reads the answer and an end of stream; the connection is closed a moment
            // later (closing at once, with unread bytes, would reset it and lose the answer).
            discarding = true
            disarm()
            let bound = context.loopBound
            context.writeAndFlush(data).always { _ in
                bound.value.close(mode: .output, promise: nil)
                bound.value.eventLoop.assumeIsolated().scheduleTask(in: Self.linger) {
                    bound.value.close(promise: nil)
                }
            }.cascade(to: promise)
        }
    }

    /// How long a connection answered early stays half-open for the client to read the answer.
    static let linger = TimeAmount.seconds(1)

    /// Once answered early, the connection reads nothing more.
    func read(context: ChannelHandlerContext) {
        if !discarding { context.read() }
    }
}

extension TimeAmount {
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
