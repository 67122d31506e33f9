import HummingbirdCore
import Logging
import NIOCore

/// A listener's connection limit. At `maximum` open connections it stops accepting (new
/// connections wait in the operating system's queue) and says so, at most every 10 seconds.
/// With `silent`, each connection accepted within a 32nd of the limit has one silent connection
/// give way (see ``SilentConnections``), so that silent sockets cannot keep new clients out; no
/// more than a 32nd of the limit are wanted at once.
struct ConnectionLimit: AvailableConnectionsDelegate {
    private var open = 0
    let maximum: Int
    let silent: SilentConnections?
    let logger: Logger
    /// A limit reached again and again (silent sockets cycling through) is logged every 10 s at most.
    private let warnings = LogThrottle()

    init(_ maximum: Int, makingRoomIn silent: SilentConnections? = nil, logger: Logger) {
        self.maximum = maximum
        self.silent = silent
        self.logger = logger
    }

    /// Open connections past which each new one has a silent one give way: a 32nd below the limit.
    var crowded: Int { maximum - max(1, maximum / 32) }

    mutating func connectionOpened() {
        open += 1
        if open > crowded { silent?.wantRoom(atMost: maximum - crowded) }
        if open == maximum, let times = warnings.event() {
            logger.warning(
                "connection limit reached: not accepting until one closes",
                metadata: ["limit": "\(maximum)", "times": "\(times)"])
        }
    }

    mutating func connectionClosed() {
        open -= 1
        if open == crowded { silent?.enoughRoom() }
    }

    func isAcceptingNewConnections() -> Bool {
        open < maximum
    }
}
