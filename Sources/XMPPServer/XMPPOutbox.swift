import Synchronization
import XMPP

/// What one connection has yet to write, bounded in bytes, and the way to end the connection.
///
/// Ending never waits for the writer: a client that stops reading (or never finishes its TLS
/// handshake) leaves the writer suspended on a write that will not complete. `abort` writes its
/// last words straight to the channel and closes it, which fails whatever was still queued.
final class XMPPOutbox: Sendable {
    let stream: AsyncStream<XMPPOutgoing>
    private let continuation: AsyncStream<XMPPOutgoing>.Continuation
    private let backlogBytes = Atomic<Int>(0)
    private let limitBytes: Int
    private let ended = Atomic<Bool>(false)
    /// Whether the server's stream header went out (a stream error must follow one).
    private let opened = Atomic<Bool>(false)
    /// Writes bytes directly to the channel and closes it.
    private let closeChannel: @Sendable (String) -> Void
    /// When the write under way began, `nil` while none is: the writer waits on a write for as
    /// long as the client reads nothing.
    private let writeBegan = Mutex<ContinuousClock.Instant?>(nil)

    init(limitBytes: Int, closeChannel: @escaping @Sendable (String) -> Void) {
        (stream, continuation) = AsyncStream.makeStream(of: XMPPOutgoing.self)
        self.limitBytes = limitBytes
        self.closeChannel = closeChannel
    }

    func send(_ item: XMPPOutgoing) {
        guard !ended.load(ordering: .relaxed) else { return }
        switch item {
        case .stanza(let text):
            let waiting = backlogBytes.wrappingAdd(text.utf8.count, ordering: .relaxed).newValue
            guard waiting <= limitBytes else {
                abort(condition: "policy-violation", text: "the client does not read its stream")
                return
            }
            continuation.yield(item)
        case .end:
            continuation.yield(item)
            abortLater(condition: nil, text: "")
        case .fail(let condition, let text):
            continuation.yield(item)
            abortLater(condition: condition, text: text)
        }
    }

    func send(_ stanza: String) {
        send(.stanza(stanza))
    }

    /// The server's stream header is about to be written.
    func markOpened() {
        opened.store(true, ordering: .relaxed)
    }

    /// The writer is about to write a stanza.
    func writing() {
        writeBegan.withLock { $0 = .now }
    }

    /// The writer wrote `item`.
    func written(_ item: XMPPOutgoing) {
        writeBegan.withLock { $0 = nil }
        if case .stanza(let text) = item { backlogBytes.wrappingSubtract(text.utf8.count, ordering: .relaxed) }
    }

    /// How long the write under way has waited for the client to read, or `nil` when none waits.
    func writeWaiting() -> Duration? {
        writeBegan.withLock { $0.map { .now - $0 } }
    }

    /// The writer ends the connection in order, after what is queued; should it be stuck behind a
    /// client that does not read, this ends it anyway.
    private func abortLater(condition: String?, text: String) {
        Task { [self] in
            try? await Task.sleep(for: .seconds(2))
            abort(condition: condition, text: text)
        }
    }

    /// Ends the connection now: a stream error (or, without a condition, the end of the stream)
    /// written directly, then the channel closed whatever the writer is doing. Later sends are dropped.
    func abort(condition: String?, text: String = "") {
        guard !ended.exchange(true, ordering: .relaxed) else { return }
        var last = condition.map { CCSWire.streamError($0, text: text) } ?? CCSWire.streamEnd
        if !opened.load(ordering: .relaxed) {
            last = CCSWire.streamHeader(from: CCSWire.domain, id: "error") + last
        }
        closeChannel(last)
        continuation.finish()
    }
}
