/// A set of token ids as one bit per id: set algebra on whole words, counting with popcount.
///
/// A million tokens take 125 KiB, so `&&`, `||` and `!` over the most popular topics cost a few
/// thousand word operations instead of hundreds of milliseconds of SQL.
public struct Bitmap: Sendable, Equatable {
    public private(set) var words: [UInt64]

    /// An empty set for ids below `capacity`.
    public init(capacity: Int) {
        words = Array(repeating: 0, count: (max(capacity, 1) + 63) / 64)
    }

    /// The set of `ids`; the bitmap grows if an id is not below `capacity`.
    public init(capacity: Int, ids: [UInt32]) {
        let needed = max(capacity, Int(ids.max() ?? 0) + 1)
        self.init(capacity: needed)
        words.withUnsafeMutableBufferPointer { words in
            for id in ids {
                words[Int(id &>> 6)] |= 1 &<< UInt64(id & 63)
            }
        }
    }

    public mutating func insert(_ id: UInt32) {
        let index = Int(id >> 6)
        if index >= words.count { words += Array(repeating: 0, count: index + 1 - words.count) }
        words[index] |= 1 << UInt64(id & 63)
    }

    public mutating func remove(_ id: UInt32) {
        let index = Int(id >> 6)
        guard index < words.count else { return }
        words[index] &= ~(1 << UInt64(id & 63))
    }

    public func contains(_ id: UInt32) -> Bool {
        let index = Int(id >> 6)
        return index < words.count && words[index] & (1 << UInt64(id & 63)) != 0
    }

    public var count: Int {
        words.withUnsafeBufferPointer { words in
            var total = 0
            for word in words { total &+= word.nonzeroBitCount }
            return total
        }
    }

    public mutating func formIntersection(_ other: Bitmap) {
        let shared = min(words.count, other.words.count)
        combine(other, count: shared) { $0 & $1 }
        for i in shared..<words.count { words[i] = 0 }
    }

    public mutating func formUnion(_ other: Bitmap) {
        if other.words.count > words.count { words += Array(repeating: 0, count: other.words.count - words.count) }
        combine(other, count: other.words.count) { $0 | $1 }
    }

    /// Removes every id of `other`.
    public mutating func subtract(_ other: Bitmap) {
        combine(other, count: min(words.count, other.words.count)) { $0 & ~$1 }
    }

    /// Word-wise `words[i] = operation(words[i], other.words[i])` for the first `count` words, without bounds checks.
    @inline(__always)
    private mutating func combine(_ other: Bitmap, count: Int, _ operation: (UInt64, UInt64) -> UInt64) {
        other.words.withUnsafeBufferPointer { theirs in
            words.withUnsafeMutableBufferPointer { ours in
                for i in 0..<count { ours[i] = operation(ours[i], theirs[i]) }
            }
        }
    }

    /// Up to `limit` ids greater than `after`, ascending.
    public func ids(after: UInt32?, limit: Int) -> [UInt32] {
        var result: [UInt32] = []
        result.reserveCapacity(min(limit, 4096))
        let start = after.map { Int($0) + 1 } ?? 0
        var index = start >> 6
        guard index < words.count, limit > 0 else { return [] }
        var word = words[index] & (~0 << UInt64(start & 63))
        while true {
            while word != 0 {
                let bit = word.trailingZeroBitCount
                result.append(UInt32(index << 6 | bit))
                if result.count == limit { return result }
                word &= word - 1
            }
            index += 1
            guard index < words.count else { return result }
            word = words[index]
        }
    }
}
