import Logging
import Metrics
import NIOCore

/// Why the server closed a connection its client had not closed, counted in
/// `fcm_registry_connections_closed_total{reason}`: under attack, these counts are exact where the
/// log lines (see ``LogThrottle``) are not.
enum ClosedBecause: String, Sendable {
    /// No request head within the header timeout.
    case headerTimeout = "header_timeout"
    /// No whole body within the body timeout.
    case bodyTimeout = "body_timeout"
    /// Silent, near the connection limit, while a new connection came in.
    case makingRoom = "making_room"
    /// Answered before its body was read (401, 404, 413): closed rather than drained.
    case answeredEarly = "answered_early"

    /// Adds one to the reason's count.
    func count() {
        Counter(label: "fcm_registry_connections_closed_total", dimensions: [("reason", rawValue)]).increment()
    }

    /// Closes the connection of `context` once `delay` has passed, for this reason: counted, and
    /// logged as a slow connection through `log` (a line per interval for each reason).
    func close(_ context: ChannelHandlerContext, after delay: TimeAmount, log: LogThrottle, logger: Logger)
        -> Scheduled<Void>
    {
        let bound = context.loopBound
        return context.eventLoop.assumeIsolated().scheduleTask(in: delay) {
            count()
            if let closed = log.event(rawValue) {
                logger.notice(
                    "closing a slow connection",
                    metadata: [
                        "reason": "\(rawValue)", "peer": "\(bound.value.channel.remoteAddress?.description ?? "?")",
                        "closed": "\(closed)",
                    ])
            }
            bound.value.close(promise: nil)
        }
    }
}
