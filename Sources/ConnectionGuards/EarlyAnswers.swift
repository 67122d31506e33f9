import NIOCore
import Synchronization

/// Early answers per peer address in the current second, to tell a reconnecting flood from a
/// client that sent one body too many. Bounded: at most `maximumPeers` addresses are tracked.
final class EarlyAnswers: Sendable {
    static let shared = EarlyAnswers()

    /// Early answers a second from one address before the rest are held back.
    static let perSecond = 20
    private static let maximumPeers = 10_000

    private struct State {
        var second: Int64 = 0
        var counts: [String: Int] = [:]
    }

    private let state = Mutex(State())

    /// Counts one early answer to `peer`; whether it is past the rate.
    func isFlooding(_ peer: SocketAddress?) -> Bool {
        guard let host = peer?.ipAddress else { return false }
        let second = Int64(NIODeadline.now().uptimeNanoseconds / 1_000_000_000)
        return state.withLock { state in
            if state.second != second {
                state.second = second
                state.counts.removeAll(keepingCapacity: true)
            }
            guard let count = state.counts[host] ?? (state.counts.count < Self.maximumPeers ? 0 : nil) else {
                return true
            }
            state.counts[host] = count + 1
            return count + 1 > Self.perSecond
        }
    }
}
