/// The bitmap's bytes (the checkpoint file and the message log's recipient chunks keep them): a format of its own,
/// versioned, read back with every invariant checked, since a file on disk may be damaged.
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
