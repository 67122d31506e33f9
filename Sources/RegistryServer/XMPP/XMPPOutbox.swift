import Synchronization

/// What one connection has yet to write, bounded: a client that sends without reading its
/// answers (pings, say) must not grow the server's memory. Past `limit` stanzas waiting, the
/// connection is failed with `policy-violation`.
final class XMPPOutbox: Sendable {
    let stream: AsyncStream<XMPPOutgoing>
    private let continuation: AsyncStream<XMPPOutgoing>.Continuation
    private let backlog = Atomic<Int>(0)
    private let limit: Int

    init(limit: Int) {
        (stream, continuation) = AsyncStream.makeStream(of: XMPPOutgoing.self)
        self.limit = limit
    }

    func send(_ item: XMPPOutgoing) {
        let waiting = backlog.wrappingAdd(1, ordering: .relaxed).newValue
        if waiting > limit, case .stanza = item {
            continuation.yield(.fail(condition: "policy-violation", text: "the client does not read its stream"))
            return
        }
        continuation.yield(item)
    }

    func send(_ stanza: String) {
        send(.stanza(stanza))
    }

    /// The writer took one item off.
    func written() {
        backlog.wrappingSubtract(1, ordering: .relaxed)
    }
}
