/// A topic's place in the listing by size: more subscribers first, then by name.
public struct TopicRank: Sendable, Hashable, Comparable {
    public var subscribers: Int
    public var name: String

    public init(subscribers: Int, name: String) {
        self.subscribers = subscribers
        self.name = name
    }

    /// Earlier in the listing is smaller.
    public static func < (lhs: TopicRank, rhs: TopicRank) -> Bool {
        lhs.subscribers != rhs.subscribers ? lhs.subscribers > rhs.subscribers : lhs.name < rhs.name
    }

    /// The rank as a page token holds it: `"<subscribers> <name>"` (topic names have no spaces).
    public var position: String { "\(subscribers) \(name)" }

    /// Reads a page token's position; `nil` when it is not one.
    public init?(position: String) {
        guard let space = position.firstIndex(of: " "), let subscribers = Int(position[..<space]), subscribers >= 0
        else { return nil }
        self.init(subscribers: subscribers, name: String(position[position.index(after: space)...]))
    }

    /// The first `count` ranks after `after`, in order: one pass that keeps the best `count` in a
    /// bounded max-heap, O(n log count) for n topics, whatever n is.
    static func best(_ count: Int, of ranks: some Sequence<TopicRank>, after: TopicRank?) -> [TopicRank] {
        guard count > 0 else { return [] }
        var heap = BoundedMaxHeap(capacity: count)
        for rank in ranks where after.map({ $0 < rank }) ?? true {
            heap.offer(rank)
        }
        return heap.sorted()
    }
}

/// The smallest `capacity` ranks offered, with the largest of them on top to be pushed out.
private struct BoundedMaxHeap {
    let capacity: Int
    private var items: [TopicRank] = []

    init(capacity: Int) {
        self.capacity = capacity
        items.reserveCapacity(capacity)
    }

    mutating func offer(_ rank: TopicRank) {
        if items.count < capacity {
            items.append(rank)
            siftUp(items.count - 1)
        } else if rank < items[0] {
            items[0] = rank
            siftDown(0)
        }
    }

    func sorted() -> [TopicRank] { items.sorted() }

    private mutating func siftUp(_ index: Int) {
        var child = index
        while child > 0 {
            let parent = (child - 1) / 2
            guard items[parent] < items[child] else { return }
            items.swapAt(parent, child)
            child = parent
        }
    }

    private mutating func siftDown(_ index: Int) {
        var parent = index
        while true {
            let left = 2 * parent + 1
            let right = left + 1
            var largest = parent
            if left < items.count, items[largest] < items[left] { largest = left }
            if right < items.count, items[largest] < items[right] { largest = right }
            guard largest != parent else { return }
            items.swapAt(parent, largest)
            parent = largest
        }
    }
}
