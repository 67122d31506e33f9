/// Reading a container without changing it: lookups, bounds and ids in order, shared by the bitmap's `contains`,
/// `min`/`max` and its paged `ids(after:limit:)`.
extension RoaringContainer {
    /// First index in `start ..< end` whose value is not below `value`.
    @inline(__always)
    static func lowerBound(
        _ values: UnsafeBufferPointer<UInt16>, _ value: UInt16, from start: Int = 0, to end: Int? = nil
    )
        -> Int
    {
        var low = start
        var high = end ?? values.count
        while low < high {
            let middle = (low &+ high) &>> 1
            if values[middle] < value { low = middle &+ 1 } else { high = middle }
        }
        return low
    }

    /// First index at or after `start` whose value is not below `value`, by doubling steps then bisection: cheap
    /// when the answer is near `start`, as when walking a long array against a short one.
    @inline(__always)
    static func gallop(_ values: UnsafeBufferPointer<UInt16>, _ value: UInt16, from start: Int) -> Int {
        if start >= values.count || values[start] >= value { return start }
        var below = start
        var step = 1
        while below &+ step < values.count && values[below &+ step] < value {
            below &+= step
            step &<<= 1
        }
        return lowerBound(values, value, from: below &+ 1, to: Swift.min(below &+ step &+ 1, values.count))
    }

    /// Index of the first run ending at or after `value` (the run that holds it, if any).
    @inline(__always)
    static func firstRun(endingAtOrAfter value: Int, in runs: UnsafeBufferPointer<RoaringRun>) -> Int {
        var low = 0
        var high = runs.count
        while low < high {
            let middle = (low &+ high) &>> 1
            if runs[middle].last < value { low = middle &+ 1 } else { high = middle }
        }
        return low
    }

    func contains(_ value: UInt16) -> Bool {
        switch self {
        case .array(let values):
            return values.withUnsafeBufferPointer { values in
                let index = Self.lowerBound(values, value)
                return index < values.count && values[index] == value
            }
        case .bitmap(let words, _):
            return words.withUnsafeBufferPointer { ($0[Int(value &>> 6)] &>> UInt64(value & 63)) & 1 != 0 }
        case .run(let runs, _):
            return runs.withUnsafeBufferPointer { runs in
                let index = Self.firstRun(endingAtOrAfter: Int(value), in: runs)
                return index < runs.count && runs[index].first <= Int(value)
            }
        }
    }

    var minimum: UInt16 {
        switch self {
        case .array(let values):
            return values[0]
        case .bitmap(let words, _):
            var index = 0
            while words[index] == 0 { index &+= 1 }
            return UInt16(truncatingIfNeeded: index &<< 6 | words[index].trailingZeroBitCount)
        case .run(let runs, _):
            return runs[0].start
        }
    }

    var maximum: UInt16 {
        switch self {
        case .array(let values):
            return values[values.count &- 1]
        case .bitmap(let words, _):
            var index = Self.wordCount &- 1
            while words[index] == 0 { index &-= 1 }
            return UInt16(truncatingIfNeeded: index &<< 6 | (63 &- words[index].leadingZeroBitCount))
        case .run(let runs, _):
            return UInt16(truncatingIfNeeded: runs[runs.count &- 1].last)
        }
    }

    /// Appends `high | low` for the values not below `start`, ascending, until `result` holds `limit` ids.
    func appendIDs(from start: Int, high: UInt32, limit: Int, to result: inout [UInt32]) {
        switch self {
        case .array(let values):
            values.withUnsafeBufferPointer { values in
                var index = Self.lowerBound(values, UInt16(truncatingIfNeeded: start))
                while index < values.count && result.count < limit {
                    result.append(high | UInt32(values[index]))
                    index &+= 1
                }
            }
        case .bitmap(let words, _):
            words.withUnsafeBufferPointer { words in
                var index = start &>> 6
                var word = words[index] & (~UInt64(0) &<< UInt64(start & 63))
                while result.count < limit {
                    while word != 0 && result.count < limit {
                        result.append(high | UInt32(truncatingIfNeeded: index &<< 6 | word.trailingZeroBitCount))
                        word &= word &- 1
                    }
                    index &+= 1
                    guard index < Self.wordCount else { return }
                    word = words[index]
                }
            }
        case .run(let runs, _):
            runs.withUnsafeBufferPointer { runs in
                var index = Self.firstRun(endingAtOrAfter: start, in: runs)
                guard index < runs.count else { return }
                var value = Swift.max(start, runs[index].first)
                while result.count < limit {
                    result.append(high | UInt32(truncatingIfNeeded: value))
                    if value == runs[index].last {
                        index &+= 1
                        guard index < runs.count else { return }
                        value = runs[index].first
                    } else {
                        value &+= 1
                    }
                }
            }
        }
    }
}
