/// Turning ids between a container's three forms (sorted values, bitmap words, runs) and choosing the form a
/// size calls for: one set of conversions for the kernels, the serialized form and `WordwiseAlgebra`.
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
