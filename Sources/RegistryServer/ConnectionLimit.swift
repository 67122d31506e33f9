import HummingbirdCore
import Logging
import NIOCore

/// A listener's connection limit. At `maximum` open connections it stops accepting (new
/// connections wait in the operating system's queue) and says so, at most every ``warningEvery``.
/// With `silent`, each connection accepted within a 32nd of the limit has one silent connection
/// give way (see ``SilentConnections``), so that silent sockets cannot keep new clients out.
struct ConnectionLimit: AvailableConnectionsDelegate {
    private var open = 0
    private var lastWarning: NIODeadline?
    let maximum: Int
    let silent: SilentConnections?
    let logger: Logger

    /// A limit reached again and again (silent sockets cycling through) is logged this often.
    static let warningEvery = TimeAmount.seconds(10)

    init(_ maximum: Int, makingRoomIn silent: SilentConnections? = nil, logger: Logger) {
        self.maximum = maximum
        self.silent = silent
        self.logger = logger
    }

    /// Open connections past which each new one has a silent one give way: a 32nd below the limit.
    var crowded: Int { maximum - max(1, maximum / 32) }

    mutating func connectionOpened() {
        open += 1
        if open > crowded { silent?.wantRoom() }
        if open == maximum {
            let now = NIODeadline.now()
            if lastWarning.map({ now - $0 >= Self.warningEvery }) ?? true {
                lastWarning = now
                logger.warning(
                    "connection limit reached: not accepting until one closes", metadata: ["limit": "\(maximum)"])
            }
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
