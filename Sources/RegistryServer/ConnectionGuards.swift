import HTTPTypes
import Logging
import NIOCore
import NIOHTTPTypes

/// Deadlines on each HTTP/1 connection that Hummingbird's idle timeout does not give: the whole
/// request head must arrive within `headerTimeout` (a client trickling header bytes resets no
/// idle timer), and the whole body within `bodyTimeout` of its head (a client trickling one body
/// byte at a time does). A connection that misses one is closed and the reason logged.
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
    private var responsePending = false

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
        switch unwrapInboundIn(data) {
        case .head:
            requestComplete = false
            responsePending = true
            arm(context, bodyTimeout, "request body not received in time")
        case .body:
            break
        case .end:
            requestComplete = true
            if responsePending { disarm() } else { arm(context, headerTimeout, "request head not received in time") }
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        guard case .end = unwrapOutboundIn(data) else {
            context.write(data, promise: promise)
            return
        }
        responsePending = false
        if requestComplete {
            arm(context, headerTimeout, "request head not received in time")
            context.write(data, promise: promise)
        } else {
            // Answered before the body was read: send the answer, then close instead of draining.
            disarm()
            let bound = context.loopBound
            context.writeAndFlush(data).always { _ in bound.value.close(promise: nil) }.cascade(to: promise)
        }
    }
}

extension TimeAmount {
    init(_ duration: Duration) {
        let (seconds, attoseconds) = duration.components
        self = .nanoseconds(seconds * 1_000_000_000 + attoseconds / 1_000_000_000)
    }
}
