/// One topic's members in the audience index: a sorted array while the topic is small, a
/// `RoaringBitmap` once it is large.
///
/// Most topics of a large registry are small, and their few members are spread over the whole
/// id range: as a bitmap, each member would sit in a container of its own, with a container's
/// overhead (tens of bytes) for four bytes of data. As a plain sorted array a small topic costs
/// four bytes a member. Set algebra turns it into a bitmap when asked, in time proportional to
/// its (small) size.
public enum TopicMembers: Sendable {
    case small([UInt32])
    case large(RoaringBitmap)

    /// A small topic past this many members becomes a bitmap.
    static let largeFrom = 4096
    /// A large topic that falls below this many becomes an array again (a gap, so a topic
    /// hovering around the limit does not convert back and forth).
    static let smallBelow = 2048

    /// Members from ids in ascending order, in the representation their number calls for.
    public init(sortedIDs ids: [UInt32]) {
        if ids.count > Self.largeFrom {
            var bitmap = RoaringBitmap(sortedIDs: ids)
            bitmap.runOptimize()
            self = .large(bitmap)
        } else {
            self = .small(ids)
        }
    }

    /// Members from a bitmap (as a checkpoint stores them).
    init(_ bitmap: RoaringBitmap) {
        self = bitmap.count > Self.largeFrom ? .large(bitmap) : .small(Array(bitmap.ids))
    }

    public var count: Int {
        switch self {
        case .small(let ids): ids.count
        case .large(let bitmap): bitmap.count
        }
    }

    public var isEmpty: Bool { count == 0 }

    /// The members as a bitmap, for set algebra.
    public var bitmap: RoaringBitmap {
        switch self {
        case .small(let ids): RoaringBitmap(sortedIDs: ids)
        case .large(let bitmap): bitmap
        }
    }

    /// The members in chunk `key` (ids whose upper 16 bits are `key`), as bits in `words`,
    /// overwriting what was there.
    func spread(chunk key: UInt16, into words: UnsafeMutableBufferPointer<UInt64>) {
        switch self {
        case .large(let bitmap):
            if let container = bitmap.container(forKey: key) {
                container.spread(into: words)
            } else {
                words.update(repeating: 0)
            }
        case .small(let ids):
            words.update(repeating: 0)
            let low = UInt32(key) &<< 16
            let start = Self.firstIndex(in: ids, above: low == 0 ? nil : low &- 1)
            var end = start
            while end < ids.count && ids[end] &>> 16 == UInt32(key) { end &+= 1 }
            ids.withUnsafeBufferPointer { ids in
                RoaringContainer.setBits(UnsafeBufferPointer(rebasing: ids[start..<end]), in: words)
            }
        }
    }

    /// Index of the first id greater than `after` (all of them when `nil`), by binary search.
    private static func firstIndex(in ids: [UInt32], above after: UInt32?) -> Int {
        guard let after else { return 0 }
        var low = 0
        var high = ids.count
        while low < high {
            let middle = (low + high) / 2
            if ids[middle] <= after { low = middle + 1 } else { high = middle }
        }
        return low
    }

    /// Heap bytes held, estimated.
    var byteCount: Int {
        switch self {
        case .small(let ids): 32 + ids.count * 4
        case .large(let bitmap): bitmap.byteCount
        }
    }

    /// Up to `limit` members greater than `after`, ascending, in time proportional to the page.
    public func ids(after: UInt32?, limit: Int) -> [UInt32] {
        switch self {
        case .large(let bitmap):
            return bitmap.ids(after: after, limit: limit)
        case .small(let ids):
            return Array(ids[Self.firstIndex(in: ids, above: after)...].prefix(limit))
        }
    }

    mutating func insert(contentsOf incoming: [UInt32]) {
        switch self {
        case .large(var bitmap):
            self = .small([])  // let go of the bitmap so the insert below works in place
            bitmap.insert(contentsOf: incoming)
            self = .large(bitmap)
        case .small(var ids):
            self = .small([])
            let sorted = incoming.sorted()
            if let last = ids.last, let first = sorted.first, first <= last {
                ids = Self.merge(ids, sorted)
            } else {
                for id in sorted where ids.last != id { ids.append(id) }
            }
            self = ids.count > Self.largeFrom ? TopicMembers(sortedIDs: ids) : .small(ids)
        }
    }

    mutating func remove(contentsOf leaving: [UInt32]) {
        switch self {
        case .large(var bitmap):
            self = .small([])
            bitmap.remove(contentsOf: leaving)
            self = bitmap.count < Self.smallBelow ? .small(Array(bitmap.ids)) : .large(bitmap)
        case .small(var ids):
            self = .small([])
            let gone = Set(leaving)
            ids.removeAll { gone.contains($0) }
            self = .small(ids)
        }
    }

    /// Two ascending arrays as one, without repeats.
    private static func merge(_ left: [UInt32], _ right: [UInt32]) -> [UInt32] {
        var merged: [UInt32] = []
        merged.reserveCapacity(left.count + right.count)
        var i = 0
        var j = 0
        while i < left.count || j < right.count {
            let next: UInt32
            if j == right.count || (i < left.count && left[i] <= right[j]) {
                next = left[i]
                i += 1
            } else {
                next = right[j]
                j += 1
            }
            if merged.last != next { merged.append(next) }
        }
        return merged
    }
}

extension TopicMembers: Hashable {
    /// Equal when they hold the same ids, whatever their representation.
    public static func == (lhs: TopicMembers, rhs: TopicMembers) -> Bool {
        switch (lhs, rhs) {
        case (.small(let a), .small(let b)): a == b
        default: lhs.bitmap == rhs.bitmap
        }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(bitmap)
    }
}
