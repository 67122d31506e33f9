import HummingbirdCore
import Logging
import NIOCore

/// A listener's connection limit. At `maximum` open connections it stops accepting (new
/// connections wait in the operating system's queue, as HAProxy's `maxconn` has them do) and
/// says so, at most every 10 seconds. Every listener has one: plain HTTP and TLS through
/// Hummingbird's `availableConnectionsDelegate`, XMPP on its server channel.
/// With `silent`, each connection accepted within a 32nd of the limit has one silent connection
/// give way (see ``SilentConnections``), so that silent sockets cannot keep new clients out; no
/// more are wanted at once than it takes to get back below that band. The server socket accepts
/// a few connections for each read it is allowed, so open connections can pass the limit by a
/// few; the room wanted then covers those too.
public struct ConnectionLimit: AvailableConnectionsDelegate {
    private var open = 0
    let maximum: Int
    let silent: SilentConnections?
    /// Which listener, in the log line.
    let listener: String
    let logger: Logger
    /// A limit reached again and again (silent sockets cycling through) is logged every 10 s at most.
    private let warnings = LogThrottle()

    public init(_ maximum: Int, makingRoomIn silent: SilentConnections? = nil, listener: String, logger: Logger) {
        self.maximum = maximum
        self.silent = silent
        self.listener = listener
        self.logger = logger
    }

    /// Open connections past which each new one has a silent one give way: a 32nd below the limit.
    var crowded: Int { maximum - max(1, maximum / 32) }

    public mutating func connectionOpened() {
        open += 1
        if open > crowded { silent?.wantRoom(atMost: open - crowded) }
        if open == maximum, let times = warnings.event() {
            logger.warning(
                "connection limit reached: not accepting until one closes",
                metadata: ["listener": "\(listener)", "limit": "\(maximum)", "times": "\(times)"])
        }
    }

    public mutating func connectionClosed() {
        open -= 1
        if open == crowded { silent?.enoughRoom() }
    }

    public func isAcceptingNewConnections() -> Bool {
        open < maximum
    }
}
