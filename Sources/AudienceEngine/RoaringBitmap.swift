/// A set of `UInt32` ids, compressed in the manner of Roaring bitmaps, whose copy-on-write is per 65,536-id chunk.
///
/// Ids are split by their high 16 bits into chunks. Each non-empty chunk is one container holding the low 16 bits
/// in one of three forms: a sorted array (up to 2,048 values), a 65,536-bit bitmap, or a list of runs.
/// Set algebra works chunk by chunk with a kernel per pair of forms, so its cost follows the data held, never the
/// size of the id space.
///
/// ## Why this type exists
///
/// The audience index is read through cheap snapshots while writes apply in place. Copying a `RoaringBitmap`
/// copies nothing: it retains two arrays. Containers are value types (an enum whose payload is one array of at most
/// 8 KiB), so when a writer inserts or removes an id in a bitmap a reader still holds, the writer copies the small
/// top-level arrays (one entry per 65,536 ids) and the single container it touches; every other container stays
/// shared, and the reader's snapshot is unchanged. A plain bitmap or `Set` would copy the whole topic instead.
public struct RoaringBitmap: Sendable {
    /// High halves of the non-empty chunks, strictly ascending.
    var keys: [UInt16]
    /// `containers[i]` holds the low halves of chunk `keys[i]`; never empty.
    var containers: [RoaringContainer]

    /// The empty set.
    public init() {
        keys = []
        containers = []
    }

    /// The set of `ids`, given in any order, duplicates allowed.
    public init(_ ids: some Sequence<UInt32>) {
        var all = Array(ids)
        self.init(sorting: &all)
    }

    /// The set of `sortedIDs`, which should be strictly ascending, as read from SQL ordered by id.
    ///
    /// Builds each container in one pass. Input that turns out not to be strictly ascending is sorted and
    /// deduplicated first, so the result is right either way; only the fast path is lost.
    public init(sortedIDs: [UInt32]) {
        let ascending = sortedIDs.withUnsafeBufferPointer { ids in
            var k = 1
            while k < ids.count {
                if ids[k] <= ids[k &- 1] { return false }
                k &+= 1
            }
            return true
        }
        if ascending {
            self.init(ascending: sortedIDs)
        } else {
            var all = sortedIDs
            self.init(sorting: &all)
        }
    }

    private init(sorting ids: inout [UInt32]) {
        ids.sort()
        let unique = ids.withUnsafeMutableBufferPointer { ids in
            guard !ids.isEmpty else { return 0 }
            var kept = 1
            for k in 1..<ids.count where ids[k] != ids[kept &- 1] {
                ids[kept] = ids[k]
                kept &+= 1
            }
            return kept
        }
        ids.removeSubrange(unique...)
        self.init(ascending: ids)
    }

    /// The set of strictly ascending `ids`.
    private init(ascending ids: [UInt32]) {
        keys = []
        containers = []
        ids.withUnsafeBufferPointer { ids in
            var start = 0
            while start < ids.count {
                let high = ids[start] &>> 16
                var end = start &+ 1
                while end < ids.count && ids[end] &>> 16 == high { end &+= 1 }
                keys.append(UInt16(truncatingIfNeeded: high))
                containers.append(RoaringContainer(sortedLows: UnsafeBufferPointer(rebasing: ids[start..<end])))
                start = end
            }
        }
    }

    // MARK: - Single ids

    @inline(__always)
    private static func split(_ id: UInt32) -> (high: UInt16, low: UInt16) {
        (UInt16(truncatingIfNeeded: id &>> 16), UInt16(truncatingIfNeeded: id))
    }

    /// Index of the first key not below `key`.
    @inline(__always)
    func keyIndex(_ key: UInt16, from start: Int = 0) -> Int {
        keys.withUnsafeBufferPointer { RoaringContainer.lowerBound($0, key, from: start) }
    }

    /// Adds `id`; returns whether it was absent. Copies at most one shared container.
    @discardableResult
    public mutating func insert(_ id: UInt32) -> Bool {
        let (high, low) = Self.split(id)
        let index = keyIndex(high)
        if index < keys.count && keys[index] == high { return containers[index].insert(low) }
        keys.insert(high, at: index)
        containers.insert(.array([low]), at: index)
        return true
    }

    /// Removes `id`; returns whether it was present. Copies at most one shared container.
    @discardableResult
    public mutating func remove(_ id: UInt32) -> Bool {
        let (high, low) = Self.split(id)
        let index = keyIndex(high)
        guard index < keys.count && keys[index] == high else { return false }
        let removed = containers[index].remove(low)
        if containers[index].cardinality == 0 {
            keys.remove(at: index)
            containers.remove(at: index)
        }
        return removed
    }

    /// Adds every id of `ids`, in any order.
    public mutating func insert(contentsOf ids: some Sequence<UInt32>) {
        var all = Array(ids)
        if all.count <= 16 {
            for id in all { insert(id) }
        } else {
            formUnion(RoaringBitmap(sorting: &all))
        }
    }

    /// Removes every id of `ids`, in any order.
    public mutating func remove(contentsOf ids: some Sequence<UInt32>) {
        var all = Array(ids)
        if all.count <= 16 {
            for id in all { remove(id) }
        } else {
            subtract(RoaringBitmap(sorting: &all))
        }
    }

    public func contains(_ id: UInt32) -> Bool {
        let (high, low) = Self.split(id)
        let index = keyIndex(high)
        return index < keys.count && keys[index] == high && containers[index].contains(low)
    }

    // MARK: - Size

    /// Number of ids: the sum of the containers' cached cardinalities, O(number of containers).
    public var count: Int {
        containers.withUnsafeBufferPointer { containers in
            var total = 0
            for container in containers { total &+= container.cardinality }
            return total
        }
    }

    public var isEmpty: Bool { keys.isEmpty }

    /// The smallest id, if any.
    public var min: UInt32? {
        guard let key = keys.first else { return nil }
        return UInt32(key) &<< 16 | UInt32(containers[0].minimum)
    }

    /// The largest id, if any.
    public var max: UInt32? {
        guard let key = keys.last else { return nil }
        return UInt32(key) &<< 16 | UInt32(containers[containers.count &- 1].maximum)
    }

    /// An estimate of the heap bytes held: array storage by capacity, plus a header per allocation.
    ///
    /// Containers shared with other bitmaps are counted in full here and there.
    public var byteCount: Int {
        let header = 32
        func bytes<T>(_ array: [T]) -> Int {
            array.capacity == 0 ? 0 : header &+ array.capacity &* MemoryLayout<T>.stride
        }
        var total = bytes(keys) &+ bytes(containers)
        for container in containers {
            switch container {
            case .array(let values): total &+= bytes(values)
            case .bitmap(let words, _): total &+= bytes(words)
            case .run(let runs, _): total &+= bytes(runs)
            }
        }
        return total
    }

    /// Converts each container to runs where runs are smaller, and back where they are not; returns whether any
    /// container changed. Worth calling after loading ids that come in long consecutive stretches.
    @discardableResult
    public mutating func runOptimize() -> Bool {
        var changed = false
        for index in containers.indices where containers[index].runOptimize() { changed = true }
        return changed
    }

    // MARK: - Set algebra

    /// Adds the ids of `other`, in place where this set's containers are not shared.
    public mutating func formUnion(_ other: RoaringBitmap) {
        if other.isEmpty { return }
        if isEmpty {
            self = other
            return
        }
        // When every chunk of `other` is already here, nothing moves and no top-level array is rebuilt.
        var j = 0
        var missing = false
        for otherKey in other.keys {
            j = keyIndex(otherKey, from: j)
            if j == keys.count || keys[j] != otherKey {
                missing = true
                break
            }
        }
        if !missing {
            j = 0
            for (k, otherKey) in other.keys.enumerated() {
                j = keyIndex(otherKey, from: j)
                containers[j].formUnion(other.containers[k])
            }
            return
        }
        let ourKeys = keys
        var ourContainers = containers
        keys = []
        containers = []
        keys.reserveCapacity(ourKeys.count &+ other.keys.count)
        containers.reserveCapacity(ourKeys.count &+ other.keys.count)
        var i = 0
        j = 0
        while i < ourKeys.count || j < other.keys.count {
            if j == other.keys.count || (i < ourKeys.count && ourKeys[i] < other.keys[j]) {
                keys.append(ourKeys[i])
                containers.append(ourContainers[i].take())
                i &+= 1
            } else if i == ourKeys.count || other.keys[j] < ourKeys[i] {
                keys.append(other.keys[j])
                containers.append(other.containers[j])
                j &+= 1
            } else {
                var container = ourContainers[i].take()
                container.formUnion(other.containers[j])
                keys.append(ourKeys[i])
                containers.append(container)
                i &+= 1
                j &+= 1
            }
        }
    }

    /// Removes the ids of `other`, in place where this set's containers are not shared.
    public mutating func subtract(_ other: RoaringBitmap) {
        let total = keys.count
        var kept = 0
        var j = 0
        for i in 0..<total {
            let key = keys[i]
            j = other.keyIndex(key, from: j)
            if j < other.keys.count && other.keys[j] == key {
                guard containers[i].subtract(other.containers[j]) else { continue }
            }
            if kept != i {
                keys[kept] = key
                containers.swapAt(kept, i)
            }
            kept &+= 1
        }
        keys.removeSubrange(kept...)
        containers.removeSubrange(kept...)
    }

    // MARK: - Reading in order

    /// Up to `limit` ids greater than `after` (all ids when nil), ascending.
    ///
    /// Finds the starting chunk and the place inside it by binary search, so a page costs what it returns.
    public func ids(after: UInt32?, limit: Int) -> [UInt32] {
        guard limit > 0, !keys.isEmpty else { return [] }
        var index = 0
        var start = 0
        if let after {
            let (high, low) = Self.split(after)
            index = keyIndex(high)
            if index < keys.count && keys[index] == high {
                if low == UInt16.max { index &+= 1 } else { start = Int(low) &+ 1 }
            }
        }
        var result: [UInt32] = []
        result.reserveCapacity(Swift.min(limit, 4096))
        while index < keys.count && result.count < limit {
            containers[index].appendIDs(from: start, high: UInt32(keys[index]) &<< 16, limit: limit, to: &result)
            index &+= 1
            start = 0
        }
        return result
    }

    /// Every id, ascending.
    public var ids: some Sequence<UInt32> { RoaringIDs(bitmap: self) }

    /// The container of chunk `key`, if the set has one.
    func container(forKey key: UInt16) -> RoaringContainer? {
        let index = keyIndex(key)
        return index < keys.count && keys[index] == key ? containers[index] : nil
    }
}

// MARK: - Iteration

/// The ids of a ``RoaringBitmap`` in ascending order.
struct RoaringIDs: Sequence {
    let bitmap: RoaringBitmap

    var underestimatedCount: Int { bitmap.count }

    func makeIterator() -> Iterator { Iterator(keys: bitmap.keys, containers: bitmap.containers) }

    /// Walks one container at a time, holding its payload directly so each step is a few instructions.
    struct Iterator: IteratorProtocol {
        let keys: [UInt16]
        let containers: [RoaringContainer]
        var index = -1
        var high: UInt32 = 0
        var kind = RoaringContainer.Kind.array
        var values: [UInt16] = []
        var words: [UInt64] = []
        var runs: [RoaringRun] = []
        /// Array index, word index or run index, by `kind`.
        var position = 0
        var word: UInt64 = 0
        var nextInRun = 0
        var lastInRun = -1

        init(keys: [UInt16], containers: [RoaringContainer]) {
            self.keys = keys
            self.containers = containers
        }

        mutating func next() -> UInt32? {
            while true {
                switch kind {
                case .array:
                    if position < values.count {
                        defer { position &+= 1 }
                        return high | UInt32(values[position])
                    }
                case .bitmap:
                    while word == 0 && position < RoaringContainer.wordCount &- 1 {
                        position &+= 1
                        word = words[position]
                    }
                    if word != 0 {
                        let bit = word.trailingZeroBitCount
                        word &= word &- 1
                        return high | UInt32(truncatingIfNeeded: position &<< 6 | bit)
                    }
                case .run:
                    if nextInRun <= lastInRun {
                        defer { nextInRun &+= 1 }
                        return high | UInt32(truncatingIfNeeded: nextInRun)
                    }
                    if position < runs.count {
                        nextInRun = runs[position].first
                        lastInRun = runs[position].last
                        position &+= 1
                        continue
                    }
                }
                guard advance() else { return nil }
            }
        }

        private mutating func advance() -> Bool {
            index &+= 1
            guard index < containers.count else { return false }
            high = UInt32(keys[index]) &<< 16
            values = []
            words = []
            runs = []
            position = 0
            switch containers[index] {
            case .array(let payload):
                kind = .array
                values = payload
            case .bitmap(let payload, _):
                kind = .bitmap
                words = payload
                word = payload[0]
            case .run(let payload, _):
                kind = .run
                runs = payload
                nextInRun = 0
                lastInRun = -1
            }
            return true
        }
    }
}

// MARK: - Equality

extension RoaringBitmap: Hashable {
    /// Same ids, whatever forms their containers take.
    public static func == (lhs: RoaringBitmap, rhs: RoaringBitmap) -> Bool {
        lhs.keys == rhs.keys && lhs.containers == rhs.containers
    }

    /// Hashes the ids as runs, so that a set hashes alike in any form. O(size of the set).
    public func hash(into hasher: inout Hasher) {
        hasher.combine(keys.count)
        for (key, container) in zip(keys, containers) {
            hasher.combine(key)
            hasher.combine(container.cardinality)
            for run in container.canonicalRuns {
                hasher.combine(run.start)
                hasher.combine(run.lengthMinusOne)
            }
        }
    }
}

// MARK: - Serialization

extension RoaringBitmap {
    /// Why bytes could not be read as a bitmap.
    public enum FormatError: Error, Equatable, Sendable {
        /// The bytes end before the bitmap does.
        case truncated
        /// The first byte is not a format version this code reads.
        case unsupportedVersion
        /// More containers than the 65,536 chunks of the id space.
        case tooManyContainers
        /// Container keys are not strictly ascending.
        case unsortedKeys
        /// A container kind other than 0 (array), 1 (bitmap) or 2 (run).
        case unknownKind
        /// A cardinality outside what its container kind allows.
        case badCardinality
        /// Array values not strictly ascending; runs too many, unsorted, overlapping, touching, or past 65,535.
        case badPayload
        /// The payload holds a different number of ids than its container states.
        case cardinalityMismatch
    }

    /// The layout below. It does not depend on how the bitmap is tuned in memory: a reader takes
    /// an array or a bitmap of any size and keeps each chunk in the form its own tuning wants, so
    /// that changing the in-memory array limit changes no file. Version 1 (written while arrays
    /// went up to 4,096 values, and by this code a little later) has the same layout.
    static let formatVersion: UInt8 = 2

    /// Appends the bitmap to `buffer`, in this little-endian format:
    ///
    /// ```
    /// u8  version                 2
    /// u32 container count         0 ... 65,536
    /// per container, keys strictly ascending:
    ///   u16 key                   high 16 bits of its ids
    ///   u8  kind                  0 array, 1 bitmap, 2 run
    ///   u32 cardinality           1 ... 65,536 (the writer uses arrays up to its array limit,
    ///                             bitmaps above it; a reader takes either at any size)
    ///   payload
    ///     array   cardinality × u16, strictly ascending
    ///     bitmap  1,024 × u64, bit v of word w for low half 64w + v; popcount = cardinality
    ///     run     u16 run count (1 ... 2,048), then per run u16 start, u16 length − 1;
    ///             ascending, not overlapping nor touching, ending by 65,535; lengths sum to cardinality
    /// ```
    public func serialize(into buffer: inout [UInt8]) {
        buffer.append(Self.formatVersion)
        Self.append(UInt32(keys.count), to: &buffer)
        for (key, container) in zip(keys, containers) {
            Self.append(key, to: &buffer)
            buffer.append(container.kind.rawValue)
            Self.append(UInt32(container.cardinality), to: &buffer)
            switch container {
            case .array(let values): Self.append(contentsOf: values, to: &buffer)
            case .bitmap(let words, _): Self.append(contentsOf: words, to: &buffer)
            case .run(let runs, _):
                Self.append(UInt16(runs.count), to: &buffer)
                for run in runs {
                    Self.append(run.start, to: &buffer)
                    Self.append(run.lengthMinusOne, to: &buffer)
                }
            }
        }
    }

    /// Reads a bitmap written by ``serialize(into:)`` from the front of `bytes`, and drops what it read.
    ///
    /// Every field is checked, so hostile bytes throw rather than trap. On error `bytes` is left as it was.
    /// - Throws: ``FormatError`` describing the first inconsistency.
    public init(deserializing bytes: inout ArraySlice<UInt8>) throws(FormatError) {
        var reader = ByteReader(bytes: bytes)
        let version = try reader.read(UInt8.self)
        guard (1...Self.formatVersion).contains(version) else { throw .unsupportedVersion }
        let count = try Int(reader.read(UInt32.self))
        guard count <= RoaringContainer.chunkSize else { throw .tooManyContainers }
        // Each container takes at least 9 bytes: a lying count cannot make us reserve much.
        let plausible = Swift.min(count, reader.remaining / 9)
        var keys: [UInt16] = []
        var containers: [RoaringContainer] = []
        keys.reserveCapacity(plausible)
        containers.reserveCapacity(plausible)
        for _ in 0..<count {
            let key = try reader.read(UInt16.self)
            if let previous = keys.last, key <= previous { throw .unsortedKeys }
            guard let kind = try RoaringContainer.Kind(rawValue: reader.read(UInt8.self)) else { throw .unknownKind }
            let cardinality = try Int(reader.read(UInt32.self))
            containers.append(
                try Self.readContainer(kind: kind, cardinality: cardinality, from: &reader))
            keys.append(key)
        }
        self.keys = keys
        self.containers = containers
        bytes = bytes[reader.position...]
    }

    /// One container, checked, in the form this process keeps a chunk of that size in.
    private static func readContainer(
        kind: RoaringContainer.Kind, cardinality: Int, from reader: inout ByteReader
    ) throws(FormatError) -> RoaringContainer {
        switch kind {
        case .array:
            guard (1...RoaringContainer.chunkSize).contains(cardinality) else { throw .badCardinality }
            let values = try reader.read(UInt16.self, count: cardinality)
            let ascending = values.withUnsafeBufferPointer { values in
                var k = 1
                while k < values.count {
                    if values[k] <= values[k &- 1] { return false }
                    k &+= 1
                }
                return true
            }
            guard ascending else { throw .badPayload }
            guard cardinality > RoaringContainer.arrayLimit else { return .array(values) }
            var words = [UInt64](repeating: 0, count: RoaringContainer.wordCount)
            words.withUnsafeMutableBufferPointer { words in
                values.withUnsafeBufferPointer { RoaringContainer.setBits($0, in: words) }
            }
            return .bitmap(words: words, cardinality: cardinality)
        case .bitmap:
            guard (1...RoaringContainer.chunkSize).contains(cardinality) else { throw .badCardinality }
            let words = try reader.read(UInt64.self, count: RoaringContainer.wordCount)
            let popcount = words.withUnsafeBufferPointer { words in
                var total = 0
                for word in words { total &+= word.nonzeroBitCount }
                return total
            }
            guard popcount == cardinality,
                let container = RoaringContainer.make(words: words, cardinality: cardinality)
            else { throw .cardinalityMismatch }
            return container
        case .run:
            guard (1...RoaringContainer.chunkSize).contains(cardinality) else { throw .badCardinality }
            let runCount = try Int(reader.read(UInt16.self))
            guard (1...RoaringContainer.runLimit).contains(runCount) else { throw .badPayload }
            let fields = try reader.read(UInt16.self, count: runCount &* 2)
            var runs: [RoaringRun] = []
            runs.reserveCapacity(runCount)
            var total = 0
            var previousLast = -2
            for k in 0..<runCount {
                let run = RoaringRun(start: fields[2 &* k], lengthMinusOne: fields[2 &* k &+ 1])
                guard run.first > previousLast &+ 1, run.last < RoaringContainer.chunkSize else { throw .badPayload }
                previousLast = run.last
                total &+= run.length
                runs.append(run)
            }
            guard total == cardinality else { throw .cardinalityMismatch }
            return .run(runs: runs, cardinality: cardinality)
        }
    }

    private static func append<T: FixedWidthInteger>(_ value: T, to buffer: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { buffer.append(contentsOf: $0) }
    }

    private static func append<T: FixedWidthInteger>(contentsOf values: [T], to buffer: inout [UInt8]) {
        #if _endian(little)
            values.withUnsafeBytes { buffer.append(contentsOf: $0) }
        #else
            for value in values { append(value, to: &buffer) }
        #endif
    }

    /// A cursor over untrusted bytes: every read checks what remains first.
    private struct ByteReader {
        let bytes: ArraySlice<UInt8>
        /// Index into `bytes` of the next unread byte.
        var position: Int

        init(bytes: ArraySlice<UInt8>) {
            self.bytes = bytes
            position = bytes.startIndex
        }

        var remaining: Int { bytes.endIndex &- position }

        mutating func read<T: FixedWidthInteger>(_: T.Type) throws(FormatError) -> T {
            let size = MemoryLayout<T>.size
            guard remaining >= size else { throw .truncated }
            var value: T = 0
            for k in 0..<size { value |= T(bytes[position &+ k]) &<< (8 &* k) }
            position &+= size
            return value
        }

        mutating func read<T: FixedWidthInteger>(_: T.Type, count: Int) throws(FormatError) -> [T] {
            let size = MemoryLayout<T>.size
            guard remaining / size >= count else { throw .truncated }
            let offset = position &- bytes.startIndex
            let values = bytes.withUnsafeBytes { raw in
                [T](unsafeUninitializedCapacity: count) { out, n in
                    UnsafeMutableRawBufferPointer(out).copyMemory(
                        from: UnsafeRawBufferPointer(rebasing: raw[offset..<(offset &+ count &* size)]))
                    #if !_endian(little)
                        for k in 0..<count { out[k] = T(littleEndian: out[k]) }
                    #endif
                    n = count
                }
            }
            position &+= count &* size
            return values
        }
    }
}

// MARK: - Chunks

extension RoaringBitmap {
    /// The bitmap cut into its 65,536-id chunks: each chunk's number (the high 16 bits of its ids)
    /// and a bitmap of its ids alone. What a store indexes per chunk, so that asking whether an
    /// id is in reads one chunk.
    public var chunks: [(chunk: UInt16, ids: RoaringBitmap)] {
        zip(keys, containers).map { key, container in
            var ids = RoaringBitmap()
            ids.keys = [key]
            ids.containers = [container]
            return (key, ids)
        }
    }

    /// The chunk an id falls in.
    public static func chunk(of id: UInt32) -> UInt16 {
        UInt16(truncatingIfNeeded: id >> 16)
    }
}
