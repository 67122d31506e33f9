/// A maximal run of consecutive low halves inside one chunk: `start ... start + lengthMinusOne`.
struct RoaringRun: Hashable, Sendable {
    var start: UInt16
    var lengthMinusOne: UInt16

    init(start: UInt16, lengthMinusOne: UInt16) {
        self.start = start
        self.lengthMinusOne = lengthMinusOne
    }

    /// The run `first ... last`; the caller guarantees `0 <= first <= last <= 65_535`.
    @inline(__always)
    init(first: Int, last: Int) {
        start = UInt16(truncatingIfNeeded: first)
        lengthMinusOne = UInt16(truncatingIfNeeded: last &- first)
    }

    @inline(__always) var first: Int { Int(start) }
    @inline(__always) var last: Int { Int(start) &+ Int(lengthMinusOne) }
    @inline(__always) var length: Int { Int(lengthMinusOne) &+ 1 }
}

/// The ids of one chunk of 65,536, by their low 16 bits, in whichever of three forms suits them.
///
/// Each form keeps its ids in one array of at most 8 KiB, so copying a container is a retain and mutating a
/// shared one copies that array alone. That bound is what makes the copy-on-write of ``RoaringBitmap`` cost one
/// chunk rather than the whole set.
///
/// Invariants, relied on by equality, by the kernels and by the reader of the serialized form: a container is never
/// empty; an array holds at most ``arrayLimit`` sorted, unique values; a bitmap holds more than ``arrayLimit`` and
/// caches its popcount; runs are sorted, neither overlap nor touch, number at most ``runLimit`` and cache the sum of
/// their lengths.
enum RoaringContainer: Sendable {
    case array([UInt16])
    case bitmap(words: [UInt64], cardinality: Int)
    case run(runs: [RoaringRun], cardinality: Int)

    /// The form of a container, also its tag in the serialized format.
    enum Kind: UInt8, Sendable {
        case array = 0
        case bitmap = 1
        case run = 2
    }

    /// Most values an array container holds. Roaring's usual limit is 4,096, where an array grows as large as a
    /// bitmap (8 KiB); here it is half that. Conditions combine bitmaps 16 bytes an instruction but walk an array
    /// value by value, so between 2,048 and 4,096 values a bitmap is several times faster to evaluate (a 5-topic
    /// count over 10M tokens: 0.36 instead of 0.88 ms) for at most twice the memory, in chunks that dense only.
    static let arrayLimit = 2048
    /// Words of a bitmap container: 65,536 bits.
    static let wordCount = 1024
    /// Most runs a run container holds: 2,048 runs are 8 KiB, the size of a bitmap.
    static let runLimit = 2048
    /// Ids per chunk.
    static let chunkSize = 65_536

    var kind: Kind {
        switch self {
        case .array: .array
        case .bitmap: .bitmap
        case .run: .run
        }
    }

    /// Number of ids held; cached, so O(1) for every form.
    var cardinality: Int {
        switch self {
        case .array(let values): values.count
        case .bitmap(_, let cardinality): cardinality
        case .run(_, let cardinality): cardinality
        }
    }

    /// Replaces the container with an empty placeholder and returns what it held, uniquely referenced if it was.
    ///
    /// Mutating an enum payload in place needs this: while `self` still holds the payload, a bound copy of it is
    /// shared and any write to it would copy.
    @inline(__always)
    mutating func take() -> RoaringContainer {
        let taken = self
        self = .array([])
        return taken
    }
}

// MARK: - Building from other forms

extension RoaringContainer {
    /// A container for ascending, unique ids that all share one chunk.
    init(sortedLows ids: UnsafeBufferPointer<UInt32>) {
        if ids.count <= Self.arrayLimit {
            self = .array(
                [UInt16](unsafeUninitializedCapacity: ids.count) { out, n in
                    for k in 0..<ids.count { out[k] = UInt16(truncatingIfNeeded: ids[k]) }
                    n = ids.count
                })
        } else {
            var words = [UInt64](repeating: 0, count: Self.wordCount)
            words.withUnsafeMutableBufferPointer { words in
                Self.setBits(ids, in: words)
            }
            self = .bitmap(words: words, cardinality: ids.count)
        }
    }

    /// The container for `words` holding `cardinality` ids: nil when empty, an array up to ``arrayLimit``.
    static func make(words: [UInt64], cardinality: Int) -> RoaringContainer? {
        if cardinality == 0 { return nil }
        if cardinality > arrayLimit { return .bitmap(words: words, cardinality: cardinality) }
        return .array(words.withUnsafeBufferPointer { words in values(count: cardinality) { words[$0] } })
    }

    /// The smallest container for canonical `runs` holding `cardinality` ids, or nil when empty.
    static func make(runs: [RoaringRun], cardinality: Int) -> RoaringContainer? {
        if cardinality == 0 { return nil }
        if runs.count &* 4 < plainBytes(cardinality: cardinality) {
            return .run(runs: runs, cardinality: cardinality)
        }
        return runs.withUnsafeBufferPointer { plain(runs: $0, cardinality: cardinality) }
    }

    /// Bytes of the array or bitmap holding `cardinality` ids, which runs must beat (four bytes a run).
    static func plainBytes(cardinality: Int) -> Int {
        cardinality > arrayLimit ? wordCount &* 8 : cardinality &* 2
    }

    /// An array or bitmap container holding the ids of `runs`.
    static func plain(runs: UnsafeBufferPointer<RoaringRun>, cardinality: Int) -> RoaringContainer {
        if cardinality > arrayLimit { return .bitmap(words: words(runs: runs), cardinality: cardinality) }
        return .array(
            [UInt16](unsafeUninitializedCapacity: cardinality) { out, n in
                n = 0
                for run in runs {
                    var value = run.first
                    while value <= run.last {
                        out[n] = UInt16(truncatingIfNeeded: value)
                        n &+= 1
                        value &+= 1
                    }
                }
            })
    }

    /// The sorted values whose bits are set in `word(0) ..< word(1023)`, of which there are `count`.
    ///
    /// Decodes four bits of every word without testing whether they exist, then advances by the word's popcount:
    /// a loop that stops after each word's last bit mispredicts on nearly every word of sparse, random data. The
    /// array keeps room for the four values that may be written past the last.
    @inline(__always)
    static func values(count: Int, word: (Int) -> UInt64) -> [UInt16] {
        [UInt16](unsafeUninitializedCapacity: count &+ 4) { out, n in
            var written = 0
            for index in 0..<wordCount {
                var bits = word(index)
                let base = index &<< 6
                let bitCount = bits.nonzeroBitCount
                for k in 0..<4 {
                    out[written &+ k] = UInt16(truncatingIfNeeded: base | bits.trailingZeroBitCount)
                    bits &= bits &- 1
                }
                var extra = written &+ 4
                while bits != 0 {
                    out[extra] = UInt16(truncatingIfNeeded: base | bits.trailingZeroBitCount)
                    extra &+= 1
                    bits &= bits &- 1
                }
                written &+= bitCount
            }
            n = written
        }
    }

    static func words(values: UnsafeBufferPointer<UInt16>) -> [UInt64] {
        var words = [UInt64](repeating: 0, count: wordCount)
        words.withUnsafeMutableBufferPointer { words in
            setBits(values, in: words)
        }
        return words
    }

    /// Sets (`insert`) or clears (`!insert`) the bits of `values` in `words`; returns how many changed.
    @inline(__always)
    static func update(
        _ words: UnsafeMutableBufferPointer<UInt64>, with values: UnsafeBufferPointer<UInt16>, insert: Bool
    ) -> Int {
        var changed = 0
        for value in values {
            let index = Int(value &>> 6)
            let shift = UInt64(value & 63)
            let old = words[index]
            changed &+= Int(truncatingIfNeeded: ((insert ? ~old : old) &>> shift) & 1)
            words[index] = insert ? old | (1 &<< shift) : old & ~(1 &<< shift)
        }
        return changed
    }

    /// Sets the bits of ascending `values` (by their low 16 bits) in zeroed `words`.
    ///
    /// Stores without loading: consecutive values mostly share a word, and a read-modify-write of the word just
    /// written would wait on that store each time. The word is built in a register and stored whole instead.
    @inline(__always)
    static func setBits<T: FixedWidthInteger & UnsignedInteger>(
        _ values: UnsafeBufferPointer<T>, in words: UnsafeMutableBufferPointer<UInt64>
    ) {
        var previous = -1
        var word: UInt64 = 0
        for value in values {
            let index = Int(truncatingIfNeeded: value &>> 6) & (wordCount &- 1)
            let same = UInt64(truncatingIfNeeded: index == previous ? 1 : 0)
            word = (word & (0 &- same)) | (1 &<< UInt64(truncatingIfNeeded: value & 63))
            words[index] = word
            previous = index
        }
    }

    static func words(runs: UnsafeBufferPointer<RoaringRun>) -> [UInt64] {
        var words = [UInt64](repeating: 0, count: wordCount)
        words.withUnsafeMutableBufferPointer { words in
            for run in runs { forEachWord(run) { words[$0] |= $1 } }
        }
        return words
    }

    /// Calls `body(index, mask)` for each word `run` touches, with the mask of its bits in that word.
    @inline(__always)
    static func forEachWord(_ run: RoaringRun, _ body: (Int, UInt64) -> Void) {
        let firstWord = run.first &>> 6
        let lastWord = run.last &>> 6
        let firstMask = ~UInt64(0) &<< UInt64(run.first & 63)
        let lastMask = ~UInt64(0) &>> UInt64(63 &- (run.last & 63))
        if firstWord == lastWord {
            body(firstWord, firstMask & lastMask)
            return
        }
        body(firstWord, firstMask)
        var index = firstWord &+ 1
        while index < lastWord {
            body(index, ~0)
            index &+= 1
        }
        body(lastWord, lastMask)
    }

    static func runs(values: UnsafeBufferPointer<UInt16>) -> [RoaringRun] {
        var runs: [RoaringRun] = []
        runs.reserveCapacity(runCount(values: values))
        var k = 0
        while k < values.count {
            let first = Int(values[k])
            var last = first
            k &+= 1
            while k < values.count && Int(values[k]) == last &+ 1 {
                last &+= 1
                k &+= 1
            }
            runs.append(RoaringRun(first: first, last: last))
        }
        return runs
    }

    static func runs(words: UnsafeBufferPointer<UInt64>) -> [RoaringRun] {
        var runs: [RoaringRun] = []
        runs.reserveCapacity(runCount(words: words))
        var index = 0
        var word = words[0]
        while true {
            while word == 0 && index < wordCount &- 1 {
                index &+= 1
                word = words[index]
            }
            if word == 0 { return runs }
            let first = index &<< 6 | word.trailingZeroBitCount
            // Fill the zeros below the lowest set bit, so the run is the block of trailing ones.
            word |= word &- 1
            while word == ~0 && index < wordCount &- 1 {
                index &+= 1
                word = words[index]
            }
            if word == ~0 {
                runs.append(RoaringRun(first: first, last: chunkSize &- 1))
                return runs
            }
            runs.append(RoaringRun(first: first, last: index &<< 6 | (~word).trailingZeroBitCount &- 1))
            word &= word &+ 1
        }
    }

    static func runCount(values: UnsafeBufferPointer<UInt16>) -> Int {
        guard !values.isEmpty else { return 0 }
        var count = 1
        var k = 1
        while k < values.count {
            if values[k] != values[k &- 1] &+ 1 { count &+= 1 }
            k &+= 1
        }
        return count
    }

    /// Number of runs in a bitmap: one per position where a set bit is followed by a clear one, or by the end.
    static func runCount(words: UnsafeBufferPointer<UInt64>) -> Int {
        var count = 0
        for index in 0..<(wordCount &- 1) {
            let word = words[index]
            count &+= ((word &<< 1) & ~word).nonzeroBitCount
            count &+= Int((word &>> 63) & ~words[index &+ 1] & 1)
        }
        let word = words[wordCount &- 1]
        return count &+ ((word &<< 1) & ~word).nonzeroBitCount &+ Int(word &>> 63)
    }

    /// The ids as canonical runs, whatever the form: the basis of equality and hashing across forms.
    var canonicalRuns: [RoaringRun] {
        switch self {
        case .array(let values): values.withUnsafeBufferPointer { Self.runs(values: $0) }
        case .bitmap(let words, _): words.withUnsafeBufferPointer { Self.runs(words: $0) }
        case .run(let runs, _): runs
        }
    }
}

// MARK: - Searching

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

// MARK: - Single values

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

// MARK: - Equality

extension RoaringContainer: Equatable {
    /// Same ids, whatever the forms.
    static func == (lhs: RoaringContainer, rhs: RoaringContainer) -> Bool {
        guard lhs.cardinality == rhs.cardinality else { return false }
        switch (lhs, rhs) {
        case (.array(let a), .array(let b)): return a == b
        case (.bitmap(let a, _), .bitmap(let b, _)): return a == b
        case (.run(let a, _), .run(let b, _)): return a == b
        default: return lhs.canonicalRuns == rhs.canonicalRuns
        }
    }
}

// MARK: - Set algebra
//
// Union and difference, what the index's updates need (conditions are evaluated by `WordwiseAlgebra`). One kernel
// per pair of forms. Arrays meet each other by galloping, merging or probing a scratch bitmap (see Kernels); arrays
// probe bitmaps; bitmaps combine word by word with popcount; runs meet arrays by a merge walk and bitmaps by
// masking whole words. Run-and-run, and run-and-array unions and differences, go through interval arithmetic,
// turning the array into runs first.
// Only `run − bitmap` expands the runs into a bitmap. Results take the form their size calls for; runs appear only
// where an operand had runs, or after `runOptimize()`.

extension RoaringContainer {
    /// The ids in either.
    static func union(_ lhs: RoaringContainer, _ rhs: RoaringContainer) -> RoaringContainer {
        switch (lhs, rhs) {
        case (.array(let a), .array(let b)):
            return a.withUnsafeBufferPointer { a in b.withUnsafeBufferPointer { b in union(a, b) } }
        case (.array(let a), .bitmap(let w, let c)), (.bitmap(let w, let c), .array(let a)):
            var words = w
            var cardinality = c
            words.withUnsafeMutableBufferPointer { words in
                a.withUnsafeBufferPointer { a in
                    cardinality &+= Self.update(words, with: a, insert: true)
                }
            }
            return .bitmap(words: words, cardinality: cardinality)
        case (.bitmap(let a, _), .bitmap(let b, _)):
            var cardinality = 0
            let words = a.withUnsafeBufferPointer { a in
                b.withUnsafeBufferPointer { b in
                    [UInt64](unsafeUninitializedCapacity: wordCount) { out, n in
                        for k in 0..<wordCount {
                            let word = a[k] | b[k]
                            out[k] = word
                            cardinality &+= word.nonzeroBitCount
                        }
                        n = wordCount
                    }
                }
            }
            return .bitmap(words: words, cardinality: cardinality)
        case (.array(let a), .run(let r, let rc)), (.run(let r, let rc), .array(let a)):
            if rc == chunkSize { return .run(runs: r, cardinality: rc) }
            let arrayRuns = a.withUnsafeBufferPointer { runs(values: $0) }
            return combine(arrayRuns, r) { $0 || $1 }!
        case (.bitmap(let w, let c), .run(let r, let rc)), (.run(let r, let rc), .bitmap(let w, let c)):
            if rc == chunkSize { return .run(runs: r, cardinality: rc) }
            var words = w
            var cardinality = c
            words.withUnsafeMutableBufferPointer { words in
                for run in r {
                    forEachWord(run) { index, mask in
                        cardinality &+= (~words[index] & mask).nonzeroBitCount
                        words[index] |= mask
                    }
                }
            }
            return .bitmap(words: words, cardinality: cardinality)
        case (.run(let a, _), .run(let b, _)):
            return combine(a, b) { $0 || $1 }!
        }
    }

    /// The ids of `lhs` not in `rhs`, or nil when none are.
    static func subtracting(_ lhs: RoaringContainer, _ rhs: RoaringContainer) -> RoaringContainer? {
        switch (lhs, rhs) {
        case (.array(let a), .array(let b)):
            return nonEmpty(a.withUnsafeBufferPointer { a in b.withUnsafeBufferPointer { b in subtract(a, b) } })
        case (.array(let a), .bitmap(let w, _)):
            return nonEmpty(
                a.withUnsafeBufferPointer { a in w.withUnsafeBufferPointer { w in filter(a, w, keep: false) } })
        case (.bitmap(let w, let c), .array(let a)):
            var words = w
            var cardinality = c
            words.withUnsafeMutableBufferPointer { words in
                a.withUnsafeBufferPointer { a in
                    cardinality &-= Self.update(words, with: a, insert: false)
                }
            }
            return make(words: words, cardinality: cardinality)
        case (.bitmap(let a, _), .bitmap(let b, _)):
            return a.withUnsafeBufferPointer { a in
                b.withUnsafeBufferPointer { b in
                    var cardinality = 0
                    for k in 0..<wordCount { cardinality &+= (a[k] & ~b[k]).nonzeroBitCount }
                    if cardinality <= arrayLimit {
                        return cardinality == 0 ? nil : .array(values(count: cardinality) { a[$0] & ~b[$0] })
                    }
                    let words = [UInt64](unsafeUninitializedCapacity: wordCount) { out, n in
                        for k in 0..<wordCount { out[k] = a[k] & ~b[k] }
                        n = wordCount
                    }
                    return .bitmap(words: words, cardinality: cardinality)
                }
            }
        case (.array(let a), .run(let r, _)):
            return nonEmpty(
                a.withUnsafeBufferPointer { a in r.withUnsafeBufferPointer { r in filter(a, r, keep: false) } })
        case (.run(let r, _), .array(let a)):
            return combine(r, a.withUnsafeBufferPointer { runs(values: $0) }) { $0 && !$1 }
        case (.bitmap(let w, let c), .run(let r, _)):
            var words = w
            var cardinality = c
            words.withUnsafeMutableBufferPointer { words in
                for run in r {
                    forEachWord(run) { index, mask in
                        cardinality &-= (words[index] & mask).nonzeroBitCount
                        words[index] &= ~mask
                    }
                }
            }
            return make(words: words, cardinality: cardinality)
        case (.run(let r, _), .bitmap(let w, _)):
            // The one pair that expands runs into a bitmap: the result's shape follows the bitmap's holes.
            var bits = r.withUnsafeBufferPointer { Self.words(runs: $0) }
            var cardinality = 0
            bits.withUnsafeMutableBufferPointer { words in
                w.withUnsafeBufferPointer { w in
                    for k in 0..<wordCount {
                        words[k] &= ~w[k]
                        cardinality &+= words[k].nonzeroBitCount
                    }
                }
            }
            return make(words: bits, cardinality: cardinality)
        case (.run(let a, _), .run(let b, _)):
            return combine(a, b) { $0 && !$1 }
        }
    }

    // MARK: In place

    /// Adds the ids of `other`; in place when this is a bitmap.
    mutating func formUnion(_ other: RoaringContainer) {
        guard case .bitmap = self else {
            self = Self.union(self, other)
            return
        }
        if case .run(_, let cardinality) = other, cardinality == Self.chunkSize {
            self = other
            return
        }
        guard case .bitmap(var words, var cardinality) = take() else { return }
        words.withUnsafeMutableBufferPointer { words in
            switch other {
            case .array(let values):
                values.withUnsafeBufferPointer { values in
                    cardinality &+= Self.update(words, with: values, insert: true)
                }
            case .bitmap(let theirs, _):
                theirs.withUnsafeBufferPointer { theirs in
                    cardinality = 0
                    for k in 0..<Self.wordCount {
                        words[k] |= theirs[k]
                        cardinality &+= words[k].nonzeroBitCount
                    }
                }
            case .run(let runs, _):
                for run in runs {
                    Self.forEachWord(run) { index, mask in
                        cardinality &+= (~words[index] & mask).nonzeroBitCount
                        words[index] |= mask
                    }
                }
            }
        }
        self = .bitmap(words: words, cardinality: cardinality)
    }

    /// Removes the ids of `other`; in place when this is a bitmap. Returns false when none are left.
    mutating func subtract(_ other: RoaringContainer) -> Bool {
        guard case .bitmap = self else {
            guard let result = Self.subtracting(self, other) else { return false }
            self = result
            return true
        }
        guard case .bitmap(var words, var cardinality) = take() else { return false }
        words.withUnsafeMutableBufferPointer { words in
            switch other {
            case .array(let values):
                values.withUnsafeBufferPointer { values in
                    cardinality &-= Self.update(words, with: values, insert: false)
                }
            case .bitmap(let theirs, _):
                theirs.withUnsafeBufferPointer { theirs in
                    cardinality = 0
                    for k in 0..<Self.wordCount {
                        words[k] &= ~theirs[k]
                        cardinality &+= words[k].nonzeroBitCount
                    }
                }
            case .run(let runs, _):
                for run in runs {
                    Self.forEachWord(run) { index, mask in
                        cardinality &-= (words[index] & mask).nonzeroBitCount
                        words[index] &= ~mask
                    }
                }
            }
        }
        guard let result = Self.make(words: words, cardinality: cardinality) else { return false }
        self = result
        return true
    }

    // MARK: Kernels

    @inline(__always)
    private static func nonEmpty(_ values: [UInt16]) -> RoaringContainer? {
        values.isEmpty ? nil : .array(values)
    }

    // Two arrays meet in one of three ways. When one is much longer (32 times; 16 for unions), the short one gallops
    // through it. When both are short, they merge. Otherwise, for differences, one is spread into
    // a scratch bitmap and the other probes it: a merge step waits on the load the previous step chose (several
    // cycles, plus mispredictions on random ids), while setting and probing bits are independent one-cycle steps,
    // so probing wins from a few dozen values on (about 4x at 3,000 against 1,300). A union must come out sorted, so
    // it merges, as two independent halves the processor overlaps. Merges write their candidate, then advance the
    // output only when it belongs there.

    /// Below this many values in both arrays together, merging beats building a scratch bitmap.
    private static let mergeLimit = 64

    @inline(__always)
    private static func step(_ condition: Bool) -> Int { condition ? 1 : 0 }

    /// Copies `source[range]` into uninitialized `out` from `offset`.
    @inline(__always)
    private static func copy(
        _ source: UnsafeBufferPointer<UInt16>, _ range: Range<Int>, to out: UnsafeMutableBufferPointer<UInt16>,
        at offset: Int
    ) {
        guard !range.isEmpty else { return }
        (out.baseAddress! + offset).initialize(from: source.baseAddress! + range.lowerBound, count: range.count)
    }

    /// Calls `body` with a temporary bitmap of `values`.
    @inline(__always)
    private static func withScratch<R>(
        _ values: UnsafeBufferPointer<UInt16>, _ body: (UnsafeBufferPointer<UInt64>) -> R
    )
        -> R
    {
        withUnsafeTemporaryAllocation(of: UInt64.self, capacity: wordCount) { words in
            words.initialize(repeating: 0)
            setBits(values, in: words)
            return body(UnsafeBufferPointer(words))
        }
    }

    private static func union(_ a: UnsafeBufferPointer<UInt16>, _ b: UnsafeBufferPointer<UInt16>) -> RoaringContainer {
        if a.count &+ b.count <= arrayLimit {
            let (small, large) = a.count <= b.count ? (a, b) : (b, a)
            return .array(
                [UInt16](unsafeUninitializedCapacity: a.count &+ b.count) { out, n in
                    n =
                        large.count >= small.count &* 16
                        ? gallopUnion(small, large, out) : mergeUnion(small, large, out)
                })
        }
        var bits = Self.words(values: a)
        var cardinality = a.count
        bits.withUnsafeMutableBufferPointer { words in cardinality &+= update(words, with: b, insert: true) }
        return make(words: bits, cardinality: cardinality)!
    }

    /// Copies `large` into `out` in slices between the values of the much shorter `small`; returns the count.
    @inline(__always)
    private static func gallopUnion(
        _ small: UnsafeBufferPointer<UInt16>, _ large: UnsafeBufferPointer<UInt16>,
        _ out: UnsafeMutableBufferPointer<UInt16>
    ) -> Int {
        var written = 0
        var j = 0
        for value in small {
            let k = gallop(large, value, from: j)
            copy(large, j..<k, to: out, at: written)
            written &+= k &- j
            j = k
            out[written] = value
            written &+= step(k == large.count || large[k] != value)
        }
        copy(large, j..<large.count, to: out, at: written)
        return written &+ large.count &- j
    }

    /// One of two interleaved merges: `a[i ..< aEnd]` with `b[j ..< bEnd]`, written from `written`.
    private struct UnionMerge {
        var i: Int
        let aEnd: Int
        var j: Int
        let bEnd: Int
        var written: Int

        @inline(__always) var isActive: Bool { i < aEnd && j < bEnd }

        @inline(__always)
        mutating func step(
            _ a: UnsafeBufferPointer<UInt16>, _ b: UnsafeBufferPointer<UInt16>,
            _ out: UnsafeMutableBufferPointer<UInt16>
        ) {
            let x = a[i]
            let y = b[j]
            out[written] = x < y ? x : y
            written &+= 1
            i &+= RoaringContainer.step(x <= y)
            j &+= RoaringContainer.step(y <= x)
        }

        /// Runs to the end of both inputs.
        @inline(__always)
        mutating func finish(
            _ a: UnsafeBufferPointer<UInt16>, _ b: UnsafeBufferPointer<UInt16>,
            _ out: UnsafeMutableBufferPointer<UInt16>
        ) {
            while isActive { step(a, b, out) }
            RoaringContainer.copy(a, i..<aEnd, to: out, at: written)
            written &+= aEnd &- i
            RoaringContainer.copy(b, j..<bEnd, to: out, at: written)
            written &+= bEnd &- j
        }
    }

    /// Merges two sorted arrays of similar length into `out`, dropping duplicates; returns the count.
    ///
    /// Each merge step waits on the load the previous one chose, so a single merge runs at that latency. Splitting
    /// both inputs at the median of `large` gives two independent merges whose steps the processor overlaps; the
    /// second half is written after room for the first and moved down at the end.
    @inline(__always)
    private static func mergeUnion(
        _ small: UnsafeBufferPointer<UInt16>, _ large: UnsafeBufferPointer<UInt16>,
        _ out: UnsafeMutableBufferPointer<UInt16>
    ) -> Int {
        let half = large.count &>> 1
        let split = half < large.count ? lowerBound(small, large[half]) : small.count
        var first = UnionMerge(i: 0, aEnd: half, j: 0, bEnd: split, written: 0)
        var second = UnionMerge(i: half, aEnd: large.count, j: split, bEnd: small.count, written: half &+ split)
        while first.isActive && second.isActive {
            first.step(large, small, out)
            second.step(large, small, out)
        }
        first.finish(large, small, out)
        second.finish(large, small, out)
        let secondCount = second.written &- (half &+ split)
        if secondCount > 0 && first.written < half &+ split {
            UnsafeMutableRawPointer(out.baseAddress! + first.written).copyMemory(
                from: out.baseAddress! + (half &+ split), byteCount: secondCount &* 2)
        }
        return first.written &+ secondCount
    }

    private static func subtract(_ a: UnsafeBufferPointer<UInt16>, _ b: UnsafeBufferPointer<UInt16>) -> [UInt16] {
        if b.count <= a.count &* 32 && a.count <= b.count &* 32 && a.count &+ b.count > mergeLimit {
            return withScratch(b) { filter(a, $0, keep: false) }
        }
        return [UInt16](unsafeUninitializedCapacity: a.count) { out, n in
            var written = 0
            var i = 0
            var j = 0
            if b.count > a.count &* 32 {
                for value in a {
                    j = gallop(b, value, from: j)
                    out[written] = value
                    written &+= step(j == b.count || b[j] != value)
                }
                i = a.count
            } else if a.count > b.count &* 32 {
                // Copy `a` in slices between the values of `b`, skipping those it holds.
                for value in b {
                    let k = gallop(a, value, from: i)
                    copy(a, i..<k, to: out, at: written)
                    written &+= k &- i
                    i = k &+ step(k < a.count && a[k] == value)
                }
            } else {
                while i < a.count && j < b.count {
                    let x = a[i]
                    let y = b[j]
                    out[written] = x
                    written &+= step(x < y)
                    i &+= step(x <= y)
                    j &+= step(y <= x)
                }
            }
            copy(a, i..<a.count, to: out, at: written)
            n = written &+ a.count &- i
        }
    }

    /// The values of `a` whose bit in `words` is set (`keep`) or clear (`!keep`).
    private static func filter(_ a: UnsafeBufferPointer<UInt16>, _ words: UnsafeBufferPointer<UInt64>, keep: Bool)
        -> [UInt16]
    {
        let wanted: UInt64 = keep ? 1 : 0
        return [UInt16](unsafeUninitializedCapacity: a.count) { out, n in
            n = 0
            for value in a {
                // Branch-free: always write, advance only when the bit matches.
                let bit = (words[Int(value &>> 6)] &>> UInt64(value & 63)) & 1
                out[n] = value
                n &+= Int(truncatingIfNeeded: (bit ^ wanted) ^ 1)
            }
        }
    }

    /// The values of `a` inside `runs` (`keep`) or outside them (`!keep`), by a merge walk.
    private static func filter(_ a: UnsafeBufferPointer<UInt16>, _ runs: UnsafeBufferPointer<RoaringRun>, keep: Bool)
        -> [UInt16]
    {
        [UInt16](unsafeUninitializedCapacity: a.count) { out, n in
            n = 0
            var r = 0
            for value in a {
                let v = Int(value)
                while r < runs.count && runs[r].last < v { r &+= 1 }
                let inside = r < runs.count && runs[r].first <= v
                if inside == keep {
                    out[n] = value
                    n &+= 1
                }
            }
        }
    }

    /// Sweeps the boundaries of two run lists, keeping the stretches where `keep(inA, inB)` holds; `keep` must be
    /// false outside both. The result takes its smallest form, or is nil when empty.
    @inline(__always)
    private static func combine(_ a: [RoaringRun], _ b: [RoaringRun], _ keep: (Bool, Bool) -> Bool)
        -> RoaringContainer?
    {
        var runs: [RoaringRun] = []
        runs.reserveCapacity(a.count &+ b.count)
        var cardinality = 0
        a.withUnsafeBufferPointer { a in
            b.withUnsafeBufferPointer { b in
                var i = 0
                var j = 0
                var position = 0
                while true {
                    // Half-open bounds from here on: a stretch is `position ..< next`.
                    while i < a.count && a[i].last &+ 1 <= position { i &+= 1 }
                    while j < b.count && b[j].last &+ 1 <= position { j &+= 1 }
                    if i == a.count && j == b.count { break }
                    let inA = i < a.count && a[i].first <= position
                    let inB = j < b.count && b[j].first <= position
                    var next = chunkSize
                    if i < a.count { next = Swift.min(next, inA ? a[i].last &+ 1 : a[i].first) }
                    if j < b.count { next = Swift.min(next, inB ? b[j].last &+ 1 : b[j].first) }
                    if keep(inA, inB) {
                        cardinality &+= next &- position
                        if let previous = runs.last, previous.last &+ 1 == position {
                            runs[runs.count &- 1] = RoaringRun(first: previous.first, last: next &- 1)
                        } else {
                            runs.append(RoaringRun(first: position, last: next &- 1))
                        }
                    }
                    position = next
                }
            }
        }
        return make(runs: runs, cardinality: cardinality)
    }
}

extension RoaringContainer {
    /// The container's values as bits in `words` (1,024 of them), overwriting what was there.
    func spread(into words: UnsafeMutableBufferPointer<UInt64>) {
        switch self {
        case .bitmap(let bits, _):
            _ = words.update(fromContentsOf: bits)
        case .array(let values):
            words.update(repeating: 0)
            values.withUnsafeBufferPointer { Self.setBits($0, in: words) }
        case .run(let runs, _):
            words.update(repeating: 0)
            for run in runs { Self.forEachWord(run) { words[$0] |= $1 } }
        }
    }
}
