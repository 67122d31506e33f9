import HummingbirdCore
import Logging
import NIOCore

/// The TLS listener's header timeout, counted from the connection's first byte: the handshake,
/// the HTTP/2 preface and the first request head must all arrive within `headerTimeout` of
/// connecting, or the connection is closed. The per-request guard (``ConnectionGuard``) starts
/// only once ALPN has chosen HTTP/1.1 or HTTP/2, so a client that never finishes its handshake,
/// or never sends a preface, would otherwise hold its slot for good.
///
/// It sits first in the connection's pipeline, before TLS, and leaves once the first request
/// head has arrived on the connection (on any of its HTTP/2 streams). Until then the connection
/// counts as silent for making room near the connection limit (``SilentConnections``), and a
/// graceful shutdown closes it at once: it has no request to finish.
public final class FirstRequestDeadline: ChannelInboundHandler, RemovableChannelHandler {
    public typealias InboundIn = ByteBuffer

    private let headerTimeout: TimeAmount
    private let slowLog: LogThrottle
    private let silent: SilentConnections?
    private let logger: Logger
    private var timer: Scheduled<Void>?

    public init(headerTimeout: Duration, slowLog: LogThrottle, silent: SilentConnections?, logger: Logger) {
        self.headerTimeout = TimeAmount(headerTimeout)
        self.slowLog = slowLog
        self.silent = silent
        self.logger = logger
    }

    public func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { start(context) }
    }

    public func channelActive(context: ChannelHandlerContext) {
        start(context)
        context.fireChannelActive()
    }

    public func channelInactive(context: ChannelHandlerContext) {
        stop(context.channel)
        context.fireChannelInactive()
    }

    public func handlerRemoved(context: ChannelHandlerContext) {
        stop(context.channel)
    }

    public func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if event is ChannelShouldQuiesceEvent {
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    private func start(_ context: ChannelHandlerContext) {
        guard timer == nil else { return }
        timer = ClosedBecause.headerTimeout.close(context, after: headerTimeout, log: slowLog, logger: logger)
        silent?.fellSilent(context.channel)
    }

    private func stop(_ channel: any Channel) {
        timer?.cancel()
        timer = nil
        silent?.spoke(channel)
    }

    /// A request head has arrived on `channel`: the deadline of its connection (the channel
    /// itself over HTTP/1.1, its parent for an HTTP/2 stream), if still there, goes. Called on
    /// the channel's event loop, which an HTTP/2 stream shares with its connection.
    static func requestArrived(on channel: any Channel) {
        for candidate in [channel, channel.parent] {
            guard let candidate, candidate.eventLoop === channel.eventLoop else { continue }
            let pipeline = candidate.pipeline.syncOperations
            if let deadline = try? pipeline.handler(type: FirstRequestDeadline.self) {
                pipeline.removeHandler(deadline, promise: nil)
                return
            }
        }
    }
}

/// A listener's connection setup with a handler put first in every connection's pipeline, before
/// whatever `base` adds (TLS, ALPN, HTTP). Cancelled (past the shutdown deadline), a connection
/// is closed: one still in its TLS handshake waits on a future that nothing else would end.
public struct GuardedChildChannel<Base: ServerChildChannel>: ServerChildChannel {
    public typealias Value = Base.Value

    let base: Base
    let makeGuard: @Sendable () -> any ChannelHandler

    public init(base: Base, makeGuard: @escaping @Sendable () -> any ChannelHandler) {
        self.base = base
        self.makeGuard = makeGuard
    }

    public func setup(channel: any Channel, logger: Logger) -> EventLoopFuture<Value> {
        do {
            try channel.pipeline.syncOperations.addHandler(makeGuard())
        } catch {
            return channel.eventLoop.makeFailedFuture(error)
        }
        return base.setup(channel: channel, logger: logger)
    }

    public func handle(value: Value, logger: Logger) async {
        await withTaskCancellationHandler {
            await base.handle(value: value, logger: logger)
        } onCancel: {
            value.channel.close(promise: nil)
        }
    }
}
