import Synchronization

/// A doorbell for the change feed: whoever listens hears "there may be something new" after each
/// ring, at most one ring held for them while they are busy. Only a hint: readers always read the
/// feed itself, and poll as well.
public final class FeedDoorbell: Sendable {
    private let listeners = Mutex([Int: AsyncStream<Void>.Continuation]())
    private let nextID = Atomic<Int>(0)

    public init() {}

    /// A stream of rings, until the listener stops iterating.
    public func listen() -> AsyncStream<Void> {
        let (stream, continuation) = AsyncStream.makeStream(of: Void.self, bufferingPolicy: .bufferingNewest(1))
        let id = nextID.wrappingAdd(1, ordering: .relaxed).newValue
        listeners.withLock { $0[id] = continuation }
        continuation.onTermination = { [weak self] _ in
            _ = self?.listeners.withLock { $0.removeValue(forKey: id) }
        }
        return stream
    }

    public func ring() {
        for continuation in listeners.withLock({ Array($0.values) }) { continuation.yield() }
    }
}
