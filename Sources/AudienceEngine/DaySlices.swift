/// Last-seen days as a bit-sliced index: slice `i` holds the tokens whose day has bit `i` set.
///
/// A day bucket per day would make "seen within 30 days" a union of 30 bitmaps, and moving a
/// token to today would first have to find the bucket it was in. Here setting a token's day
/// touches each slice once, whatever the old day was, and "on or after day `d`" is one pass over
/// the slices, high bit first (O'Neil and Quass's range search), chunk by chunk like the rest of
/// a condition.
///
/// Days are kept from ``base`` on, so that the slices of the high bits no day in use has stay
/// empty and cost nothing to pass over.
struct DaySlices: Sendable {
    static let bits = 16
    /// 2014-11-09 (day 16,384 since 1970): a `seenWithin` reaches back ten years at most, so every
    /// bound falls after it until the year 2149. A day on or before it counts as "never".
    static let base: Int32 = 16_384

    var slices = [RoaringBitmap](repeating: RoaringBitmap(), count: bits)
    /// The highest day (as stored) a token was ever set to: no token's day is above it. A bound
    /// and it agree on their high bits, and so does every day between them: there, a token on or
    /// after the bound has the bound's bits, one pass a bit instead of the range search's two or
    /// three. For a bound a month back, that is all but the lowest six bits or so.
    var highest: Int32 = 0

    /// Sets the day of each of `tokens`.
    mutating func set(_ tokens: [UInt32], to day: Int32) {
        guard !tokens.isEmpty else { return }
        let ids = RoaringBitmap(tokens)
        let value = Self.stored(day)
        highest = max(highest, value)
        for bit in 0..<Self.bits {
            if value & (1 << bit) != 0 { slices[bit].formUnion(ids) } else { slices[bit].subtract(ids) }
        }
    }

    /// The day recorded for `token` (days since 1970); 0 for none, or one on or before ``base``.
    func day(of token: UInt32) -> Int32 {
        var value: Int32 = 0
        for bit in 0..<Self.bits where slices[bit].contains(token) { value |= 1 << bit }
        return value == 0 ? 0 : value + Self.base
    }

    /// A day as the slices hold it: days after ``base``, 0 for "never", at most 65,535.
    static func stored(_ day: Int32) -> Int32 {
        min(max(day - base, 0), (1 << bits) - 1)
    }

    /// Keeps, of chunk `key`'s bits in `words`, the tokens seen on or after `day`; `greater` and
    /// `spare` are scratch registers.
    ///
    /// `words` serves as the "equal so far" set and `greater` collects those already known to be
    /// later, from the highest bit down: where the bound's bit is 1, a token without it falls out
    /// of "equal"; where it is 0, a token with it is later. An empty slice where the bound's bit is
    /// 0 costs nothing, nor does a full one where it is 1; a run container is applied run by run,
    /// without being spread.
    func keep(
        onOrAfter day: Int32, key: UInt16, _ words: UnsafeMutableBufferPointer<UInt64>,
        greater: UnsafeMutableBufferPointer<UInt64>, spare: UnsafeMutableBufferPointer<UInt64>
    ) {
        let bound = Self.stored(day)
        guard bound > 0 else { return }
        guard bound <= highest else {
            // No token was seen that late.
            words.update(repeating: 0)
            return
        }
        let count = RoaringContainer.wordCount
        // The highest bit where the bound and the highest day differ; above it, equality alone.
        // There, a bit the bound lacks is one no token has either (it would be later than the
        // highest day), so only the bound's 1 bits take a pass.
        let differing = Int(bound ^ highest)
        let split = differing == 0 ? -1 : (Int.bitWidth &- 1 &- differing.leadingZeroBitCount)
        for bit in stride(from: Self.bits &- 1, to: split, by: -1) where bound & (1 << bit) != 0 {
            guard Self.keepHaving(slices[bit].container(forKey: key), words, spare: spare) else { return }
        }
        guard split >= 0 else { return }
        greater.update(repeating: 0)
        for bit in (0...split).reversed() {
            let container = slices[bit].container(forKey: key)
            if bound & (1 << bit) != 0 {
                guard Self.keepHaving(container, words, spare: spare) else { break }
            } else if let container {
                if case .run(let runs, _) = container {
                    Self.forEachMaskedWord(runs, gaps: { _ in }) { i, mask in
                        greater[i] |= words[i] & mask
                        words[i] &= ~mask
                    }
                } else {
                    container.withWords(spare) { slice in
                        for i in 0..<count {
                            greater[i] |= words[i] & slice[i]
                            words[i] &= ~slice[i]
                        }
                    }
                }
            }
        }
        for i in 0..<count { words[i] |= greater[i] }
    }

    /// Keeps, of `words`, the tokens in a slice's `container`; `false` when that leaves none
    /// because the chunk has no token in the slice. A slice every token of the chunk is in (a
    /// high bit every recent day shares) takes no pass.
    @inline(__always)
    private static func keepHaving(
        _ container: RoaringContainer?, _ words: UnsafeMutableBufferPointer<UInt64>,
        spare: UnsafeMutableBufferPointer<UInt64>
    ) -> Bool {
        guard let container else {
            words.update(repeating: 0)
            return false
        }
        switch container {
        case .run(let runs, let cardinality):
            guard cardinality < RoaringContainer.chunkSize else { return true }
            forEachMaskedWord(runs, gaps: { words[$0] = 0 }) { i, mask in words[i] &= mask }
        case .bitmap(_, let cardinality):
            guard cardinality < RoaringContainer.chunkSize else { return true }
            fallthrough
        default:
            container.withWords(spare) { slice in for i in 0..<RoaringContainer.wordCount { words[i] &= slice[i] } }
        }
        return true
    }

    /// Calls `body(index, mask)` once for each word the runs touch, with every bit they set in it
    /// (two runs may share a word), and `gaps(index)` for each word they leave untouched, in order.
    @inline(__always)
    private static func forEachMaskedWord(
        _ runs: [RoaringRun], gaps: (Int) -> Void, _ body: (Int, UInt64) -> Void
    ) {
        var current = -1
        var mask: UInt64 = 0
        for run in runs {
            RoaringContainer.forEachWord(run) { index, bits in
                if index != current {
                    if current >= 0 { body(current, mask) }
                    var gap = current &+ 1
                    while gap < index {
                        gaps(gap)
                        gap &+= 1
                    }
                    current = index
                    mask = 0
                }
                mask |= bits
            }
        }
        if current >= 0 { body(current, mask) }
        var gap = current &+ 1
        while gap < RoaringContainer.wordCount {
            gaps(gap)
            gap &+= 1
        }
    }
}
