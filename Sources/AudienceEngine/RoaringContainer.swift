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
