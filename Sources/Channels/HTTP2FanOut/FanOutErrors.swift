import NIOHTTP2

// How a request may end without an answer, for a channel to tell apart (as FCM's does: `NotSent`
// costs no attempt, `Stalled` is tried again at once, the others wait like any unanswered request).

/// A request the upstream did not process: its stream was refused (`REFUSED_STREAM`, or above a
/// `GOAWAY`'s last stream), or it was never sent because the connection was going away. RFC 9113
/// §8.7: such a request may be sent again as it is.
public struct NotProcessed: Error, CustomStringConvertible {
    public var description: String { "the upstream did not process the request (its connection was going away)" }
}

/// A request that never started: the quota closed first (`FanOutGate`). It was not sent, so it
/// costs the recipient no attempt. A channel sending otherwise than through the fan-out may give it
/// too, for the same.
public struct NotSent: Error, CustomStringConvertible {
    public init() {}
    public var description: String { "not sent: the project's quota closed first" }
}

/// A request left unanswered far longer than the rest of its page: reset, to be tried again.
public struct Stalled: Error, CustomStringConvertible {
    /// The page's stall limit it passed.
    public var after: Duration
    public var description: String { "no answer within \(after), while the rest of its page was answered" }
}

/// A page's requests were cancelled before the upstream answered: the server is stopping, or the
/// caller gave up on the page. The recipients stay pending.
public struct CancelledPage: Error, CustomStringConvertible {
    public var description: String { "cancelled before the upstream answered" }
}

/// A page's time ran out before the upstream answered.
public struct NoAnswerInTime: Error, CustomStringConvertible {
    public var timeout: Duration
    public var description: String { "no answer from the upstream within \(timeout)" }
}

/// The upstream reset a stream before it answered.
public struct StreamReset: Error, CustomStringConvertible {
    public var reason: HTTP2ErrorCode?
    public var description: String { "the upstream reset the stream (\(reason.map { "\($0)" } ?? "no reason"))" }
}
