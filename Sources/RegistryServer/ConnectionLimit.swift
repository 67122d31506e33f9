import HummingbirdCore
import Logging
import NIOCore

/// A listener's connection limit. At `maximum` open connections it stops accepting (new
/// connections wait in the operating system's queue) and says so, at most every ``warningEvery``.
/// With `silent`, from a 32nd below the limit each new connection has the one silent longest
/// closed (see ``SilentConnections``), and so does a listener that has stopped accepting, so
/// that silent sockets cannot keep new clients out.
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

    /// Open connections from which each new one makes room: a 32nd of the limit below it.
    var crowded: Int { maximum - max(1, maximum / 32) }

    mutating func connectionOpened() {
        open += 1
        silent?.setCrowded(open > crowded)
        if open > crowded { silent?.makeRoom() }
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
        silent?.setCrowded(open > crowded)
    }

    func isAcceptingNewConnections() -> Bool {
        guard open < maximum else {
            // Not accepting until a connection closes: have the longest-silent one close.
            silent?.makeRoom()
            return false
        }
        return true
    }
}
