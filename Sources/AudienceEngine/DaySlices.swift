/// Last-seen days as a bit-sliced index: slice `i` holds the tokens whose day has bit `i` set.
///
/// A day bucket per day would make "seen within 30 days" a union of 30 bitmaps, and moving a
/// token to today would first have to find the bucket it was in. Here setting a token's day
/// touches each slice once, whatever the old day was, and "on or after day `d`" is one pass over
/// the 16 slices, high bit first (O'Neil and Quass's range search), chunk by chunk like the rest
/// of a condition.
struct DaySlices: Sendable {
    /// Days since 1970 up to 65,535 (the year 2149); a day before 1970 counts as 0.
    static let bits = 16

    var slices = [RoaringBitmap](repeating: RoaringBitmap(), count: bits)

    /// Sets the day of each of `tokens`.
    mutating func set(_ tokens: [UInt32], to day: Int32) {
        guard !tokens.isEmpty else { return }
        let ids = RoaringBitmap(tokens)
        let value = Self.clamped(day)
        for bit in 0..<Self.bits {
            if value & (1 << bit) != 0 { slices[bit].formUnion(ids) } else { slices[bit].subtract(ids) }
        }
    }

    /// The day recorded for `token`; 0 for none.
    func day(of token: UInt32) -> Int32 {
        var value: Int32 = 0
        for bit in 0..<Self.bits where slices[bit].contains(token) { value |= 1 << bit }
        return value
    }

    static func clamped(_ day: Int32) -> Int32 {
        min(max(day, 0), (1 << bits) - 1)
    }

    /// Keeps, of chunk `key`'s bits in `words`, the tokens seen on or after `day`; `greater` and
    /// `spare` are scratch registers.
    ///
    /// `words` serves as the "equal so far" set and `greater` collects those already known to be
    /// later, from the highest bit down: where the bound's bit is 1, a token without it falls out
    /// of "equal"; where it is 0, a token with it is later. An empty slice in the chunk (the high
    /// bits no day in use has) costs nothing.
    func keep(
        onOrAfter day: Int32, key: UInt16, _ words: UnsafeMutableBufferPointer<UInt64>,
        greater: UnsafeMutableBufferPointer<UInt64>, spare: UnsafeMutableBufferPointer<UInt64>
    ) {
        let bound = Self.clamped(day)
        guard bound > 0 else { return }
        let count = RoaringContainer.wordCount
        greater.update(repeating: 0)
        for bit in (0..<Self.bits).reversed() {
            let container = slices[bit].container(forKey: key)
            if bound & (1 << bit) != 0 {
                guard let container else {
                    // Nothing in the chunk has the bit: no token is still equal.
                    words.update(repeating: 0)
                    break
                }
                container.withWords(spare) { slice in for i in 0..<count { words[i] &= slice[i] } }
            } else if let container {
                container.withWords(spare) { slice in
                    for i in 0..<count {
                        greater[i] |= words[i] & slice[i]
                        words[i] &= ~slice[i]
                    }
                }
            }
        }
        for i in 0..<count { words[i] |= greater[i] }
    }
}
