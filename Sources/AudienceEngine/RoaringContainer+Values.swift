/// Inserting and removing one value, and `runOptimize()`: the index's own writes, one token at a time, each
/// keeping the container in the form its size calls for.
extension RoaringContainer {
    /// Adds `value`; an array past ``arrayLimit`` becomes a bitmap, runs past ``runLimit`` become array or bitmap.
    mutating func insert(_ value: UInt16) -> Bool {
        switch take() {
        case .array(var values):
            let index = values.withUnsafeBufferPointer { Self.lowerBound($0, value) }
            if index < values.count && values[index] == value {
                self = .array(values)
                return false
            }
            if values.count < Self.arrayLimit {
                values.insert(value, at: index)
                self = .array(values)
            } else {
                var words = values.withUnsafeBufferPointer { Self.words(values: $0) }
                words[Int(value &>> 6)] |= 1 &<< UInt64(value & 63)
                self = .bitmap(words: words, cardinality: values.count &+ 1)
            }
            return true
        case .bitmap(var words, let cardinality):
            let index = Int(value &>> 6)
            let mask = UInt64(1) &<< UInt64(value & 63)
            let inserted = words[index] & mask == 0
            words[index] |= mask
            self = .bitmap(words: words, cardinality: inserted ? cardinality &+ 1 : cardinality)
            return inserted
        case .run(var runs, let cardinality):
            let inserted = Self.insert(Int(value), into: &runs)
            self = Self.bounded(runs: runs, cardinality: inserted ? cardinality &+ 1 : cardinality)
            return inserted
        }
    }

    /// Removes `value`; a bitmap down to ``arrayLimit`` becomes an array. May leave the container empty.
    mutating func remove(_ value: UInt16) -> Bool {
        switch take() {
        case .array(var values):
            let index = values.withUnsafeBufferPointer { Self.lowerBound($0, value) }
            let removed = index < values.count && values[index] == value
            if removed { values.remove(at: index) }
            self = .array(values)
            return removed
        case .bitmap(var words, let cardinality):
            let index = Int(value &>> 6)
            let mask = UInt64(1) &<< UInt64(value & 63)
            guard words[index] & mask != 0 else {
                self = .bitmap(words: words, cardinality: cardinality)
                return false
            }
            words[index] &= ~mask
            self = Self.make(words: words, cardinality: cardinality &- 1)!
            return true
        case .run(var runs, let cardinality):
            let removed = Self.remove(Int(value), from: &runs)
            self = Self.bounded(runs: runs, cardinality: removed ? cardinality &- 1 : cardinality)
            return removed
        }
    }

    /// A run container, unless single-value edits pushed it past ``runLimit``.
    private static func bounded(runs: [RoaringRun], cardinality: Int) -> RoaringContainer {
        if runs.count <= runLimit { return .run(runs: runs, cardinality: cardinality) }
        return runs.withUnsafeBufferPointer { plain(runs: $0, cardinality: cardinality) }
    }

    private static func insert(_ value: Int, into runs: inout [RoaringRun]) -> Bool {
        let index = runs.withUnsafeBufferPointer { firstRun(endingAtOrAfter: value, in: $0) }
        if index < runs.count && runs[index].first <= value { return false }
        let extendsPrevious = index > 0 && runs[index &- 1].last &+ 1 == value
        let extendsNext = index < runs.count && runs[index].first == value &+ 1
        switch (extendsPrevious, extendsNext) {
        case (true, true):
            runs[index &- 1] = RoaringRun(first: runs[index &- 1].first, last: runs[index].last)
            runs.remove(at: index)
        case (true, false):
            runs[index &- 1].lengthMinusOne &+= 1
        case (false, true):
            runs[index] = RoaringRun(first: value, last: runs[index].last)
        case (false, false):
            runs.insert(RoaringRun(first: value, last: value), at: index)
        }
        return true
    }

    private static func remove(_ value: Int, from runs: inout [RoaringRun]) -> Bool {
        let index = runs.withUnsafeBufferPointer { firstRun(endingAtOrAfter: value, in: $0) }
        guard index < runs.count && runs[index].first <= value else { return false }
        let run = runs[index]
        if run.first == run.last {
            runs.remove(at: index)
        } else if value == run.first {
            runs[index] = RoaringRun(first: value &+ 1, last: run.last)
        } else if value == run.last {
            runs[index].lengthMinusOne &-= 1
        } else {
            runs[index] = RoaringRun(first: run.first, last: value &- 1)
            runs.insert(RoaringRun(first: value &+ 1, last: run.last), at: index &+ 1)
        }
        return true
    }

    /// Converts to runs when they are smaller than the array or bitmap, and back when they are not.
    mutating func runOptimize() -> Bool {
        let cardinality = self.cardinality
        let plainBytes = Self.plainBytes(cardinality: cardinality)
        switch self {
        case .array(let values):
            guard values.withUnsafeBufferPointer({ Self.runCount(values: $0) }) &* 4 < plainBytes else { return false }
            self = .run(runs: values.withUnsafeBufferPointer { Self.runs(values: $0) }, cardinality: cardinality)
        case .bitmap(let words, _):
            guard words.withUnsafeBufferPointer({ Self.runCount(words: $0) }) &* 4 < plainBytes else { return false }
            self = .run(runs: words.withUnsafeBufferPointer { Self.runs(words: $0) }, cardinality: cardinality)
        case .run(let runs, _):
            guard runs.count &* 4 >= plainBytes else { return false }
            self = runs.withUnsafeBufferPointer { Self.plain(runs: $0, cardinality: cardinality) }
        }
        return true
    }
}
