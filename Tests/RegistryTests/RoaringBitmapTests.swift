@testable import AudienceEngine
@testable import Registry
import RegistrySQLite
import Testing

/// Seeded with the synthetic registry's `SplitMix64`, so a failing case replays from its seed.
@Suite("RoaringBitmap")
struct RoaringBitmapTests {
    /// What the ids of a generated set look like; all span several 65,536-id chunks.
    enum Shape: String, CaseIterable, Sendable {
        /// A few hundred ids per chunk: array containers.
        case sparse
        /// Some chunks at 2,047, 2,048 or 2,049 ids, some denser: both sides of the array/bitmap threshold.
        case dense
        /// Long stretches of consecutive ids, some crossing chunk boundaries, then `runOptimize()`: run containers.
        case runs
        /// One chunk of each kind, a long stretch, and ids at chunk and range edges, including `UInt32.max`.
        case mixed
    }

    static let chunks: UInt32 = 5

    static func ids(_ shape: Shape, using random: inout SplitMix64) -> [UInt32] {
        var ids: [UInt32] = []
        switch shape {
        case .sparse:
            for _ in 0..<800 { ids.append(UInt32(random.next() % UInt64(chunks << 16))) }
        case .dense:
            for chunk in 0..<chunks where random.next() % 2 == 0 {
                let count = [2047, 2048, 2049, 4097, 9000][Int(random.next() % 5)]
                ids += distinctLows(count, using: &random).map { chunk << 16 | $0 }
            }
        case .runs:
            for _ in 0..<16 { ids += stretch(in: 0..<(chunks << 16), maxLength: 3000, using: &random) }
        case .mixed:
            ids += (0..<200).map { _ in UInt32(random.next() % 65536) }
            ids += distinctLows(6000, using: &random).map { 1 << 16 | $0 }
            for _ in 0..<12 { ids += stretch(in: (2 << 16)..<(3 << 16), maxLength: 1500, using: &random) }
            ids += (4 << 16 + 100)..<(4 << 16 + 12_000)
            ids += [0, 65535, 65536, 131071, 131072, 327679, 327680, UInt32.max - 1, UInt32.max]
        }
        return ids
    }

    /// `count` distinct values below 65,536, by a partial Fisher–Yates shuffle.
    static func distinctLows(_ count: Int, using random: inout SplitMix64) -> [UInt32] {
        var lows = Array(UInt32(0)..<65536)
        for k in 0..<count { lows.swapAt(k, k + Int(random.next() % UInt64(65536 - k))) }
        return Array(lows[..<count])
    }

    static func stretch(in range: Range<UInt32>, maxLength: UInt64, using random: inout SplitMix64) -> [UInt32] {
        let start = range.lowerBound + UInt32(random.next() % UInt64(range.count))
        let end = Swift.min(UInt64(start) + 1 + random.next() % maxLength, UInt64(range.upperBound))
        return Array(start..<UInt32(end))
    }

    /// A bitmap of `ids`, built by one of the three initializers, run-optimized for the shapes meant to hold runs.
    static func bitmap(_ ids: [UInt32], _ shape: Shape, using random: inout SplitMix64) -> RoaringBitmap {
        var bitmap: RoaringBitmap
        switch random.next() % 3 {
        case 0: bitmap = RoaringBitmap(ids)
        case 1: bitmap = RoaringBitmap(sortedIDs: Array(Set(ids)).sorted())
        default:
            bitmap = RoaringBitmap()
            for id in ids { bitmap.insert(id) }
        }
        if shape == .runs || shape == .mixed { bitmap.runOptimize() }
        return bitmap
    }

    // MARK: - Checks

    static func kinds(_ bitmap: RoaringBitmap) -> [RoaringContainer.Kind] {
        bitmap.containers.map(\.kind)
    }

    /// Checks every structural invariant the kernels and the serialized format rely on.
    static func expectValid(_ bitmap: RoaringBitmap, sourceLocation: SourceLocation = #_sourceLocation) {
        #expect(bitmap.keys.count == bitmap.containers.count, sourceLocation: sourceLocation)
        #expect(zip(bitmap.keys, bitmap.keys.dropFirst()).allSatisfy { $0 < $1 }, sourceLocation: sourceLocation)
        for container in bitmap.containers {
            switch container {
            case .array(let values):
                #expect((1...RoaringContainer.arrayLimit).contains(values.count), sourceLocation: sourceLocation)
                #expect(zip(values, values.dropFirst()).allSatisfy { $0 < $1 }, sourceLocation: sourceLocation)
            case .bitmap(let words, let cardinality):
                #expect(words.count == 1024, sourceLocation: sourceLocation)
                #expect(cardinality > RoaringContainer.arrayLimit, sourceLocation: sourceLocation)
                #expect(words.reduce(0) { $0 + $1.nonzeroBitCount } == cardinality, sourceLocation: sourceLocation)
            case .run(let runs, let cardinality):
                #expect((1...2048).contains(runs.count), sourceLocation: sourceLocation)
                #expect(runs.allSatisfy { $0.last <= 65535 }, sourceLocation: sourceLocation)
                #expect(
                    zip(runs, runs.dropFirst()).allSatisfy { $0.last + 1 < $1.first }, sourceLocation: sourceLocation)
                #expect(runs.reduce(0) { $0 + $1.length } == cardinality, sourceLocation: sourceLocation)
            }
        }
    }

    /// Checks `bitmap` holds exactly `model`, through every read path.
    static func expect(
        _ bitmap: RoaringBitmap, holds model: Set<UInt32>, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        expectValid(bitmap, sourceLocation: sourceLocation)
        // Ascending, as many as the model, each in it: the model in order, without sorting it (slow in debug builds).
        let ids = Array(bitmap.ids)
        var ascending = true
        for k in ids.indices.dropFirst() where ids[k - 1] >= ids[k] { ascending = false }
        #expect(ascending, sourceLocation: sourceLocation)
        #expect(ids.count == model.count, sourceLocation: sourceLocation)
        #expect(ids.allSatisfy(model.contains), sourceLocation: sourceLocation)
        #expect(bitmap.count == model.count, sourceLocation: sourceLocation)
        #expect(bitmap.isEmpty == model.isEmpty, sourceLocation: sourceLocation)
        #expect(bitmap.min == ids.first, sourceLocation: sourceLocation)
        #expect(bitmap.max == ids.last, sourceLocation: sourceLocation)
    }

    // MARK: - Set algebra

    @Test("Set algebra agrees with Set for every pair of shapes", arguments: Shape.allCases, Shape.allCases)
    func algebra(left: Shape, right: Shape) {
        for seed in UInt64(1)...2 {
            var random = SplitMix64(seed: seed &* 31 &+ UInt64(left.rawValue.count * 7 + right.rawValue.count))
            let a = Self.ids(left, using: &random)
            let b = Self.ids(right, using: &random)
            let setA = Set(a)
            let setB = Set(b)
            let x = Self.bitmap(a, left, using: &random)
            let y = Self.bitmap(b, right, using: &random)
            Self.expect(x, holds: setA)
            Self.expect(y, holds: setB)

            let both = setA.intersection(setB)
            let either = setA.union(setB)
            let onlyA = setA.subtracting(setB)
            let onlyB = setB.subtracting(setA)
            Self.expect(x.intersection(y), holds: both)
            Self.expect(y.intersection(x), holds: both)
            Self.expect(x.union(y), holds: either)
            Self.expect(y.union(x), holds: either)
            Self.expect(x.subtracting(y), holds: onlyA)
            Self.expect(y.subtracting(x), holds: onlyB)
            #expect(x.intersectionCount(y) == both.count)
            #expect(y.intersectionCount(x) == both.count)

            var formed = x
            formed.formUnion(y)
            Self.expect(formed, holds: either)
            formed = x
            formed.subtract(y)
            Self.expect(formed, holds: onlyA)
            formed = y
            formed.subtract(x)
            Self.expect(formed, holds: onlyB)
            // The mutating forms wrote into copies: the originals still hold what they held.
            Self.expect(x, holds: setA)
            Self.expect(y, holds: setB)

            Self.expect(x.intersection(x), holds: setA)
            Self.expect(x.union(x), holds: setA)
            Self.expect(x.subtracting(x), holds: [])
            Self.expect(x.union(RoaringBitmap()), holds: setA)
            Self.expect(x.intersection(RoaringBitmap()), holds: [])
        }
    }

    @Test("Arrays of every relative length meet correctly: galloping, merging, probing", arguments: UInt64(1)...6)
    func arrayPairs(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        let large = Self.distinctLows(2000, using: &random).map { 3 << 16 | $0 }
        // Shorter arrays, about half their ids taken from the long one, the rest anywhere in the chunk: from far
        // shorter (galloping) to comparable (merging, or probing a scratch bitmap), unions on both sides of 2,048.
        for length in [1, 2, 7, 40, 100, 400, 1000, 1500] {
            var short = (0..<length).map { _ in
                random.next() % 2 == 0 ? large[Int(random.next() % 2000)] : 3 << 16 | UInt32(random.next() % 65536)
            }
            // Past either end of the long array, so walks run off its ends.
            short[0] = length % 2 == 0 ? 3 << 16 | 65535 : 3 << 16
            let x = RoaringBitmap(short)
            let y = RoaringBitmap(large)
            #expect(Self.kinds(x) == [.array] && Self.kinds(y) == [.array])
            let (setX, setY) = (Set(short), Set(large))
            Self.expect(x.intersection(y), holds: setX.intersection(setY))
            Self.expect(y.intersection(x), holds: setX.intersection(setY))
            #expect(x.intersectionCount(y) == setX.intersection(setY).count)
            #expect(y.intersectionCount(x) == setX.intersection(setY).count)
            Self.expect(x.union(y), holds: setX.union(setY))
            Self.expect(y.union(x), holds: setX.union(setY))
            Self.expect(x.subtracting(y), holds: setX.subtracting(setY))
            Self.expect(y.subtracting(x), holds: setY.subtracting(setX))
        }
    }

    @Test("Tiny arrays with many shared values agree with Set", arguments: UInt64(1)...3)
    func tinyArrays(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        for _ in 0..<200 {
            let a = (0..<Int(random.next() % 7)).map { _ in UInt32(random.next() % 12) }
            let b = (0..<Int(random.next() % 7)).map { _ in UInt32(random.next() % 12) }
            let (x, y) = (RoaringBitmap(a), RoaringBitmap(b))
            Self.expect(x.union(y), holds: Set(a).union(b))
            Self.expect(x.intersection(y), holds: Set(a).intersection(b))
            Self.expect(x.subtracting(y), holds: Set(a).subtracting(b))
        }
    }

    @Test("Unions whose every chunk is already present are formed in place and stay right")
    func unionIntoSuperset() {
        var random = SplitMix64(seed: 99)
        let a = Self.ids(.mixed, using: &random)
        let b = a.filter { _ in random.next() % 2 == 0 }.map { $0 ^ 1 }
        var x = Self.bitmap(a, .mixed, using: &random)
        let y = RoaringBitmap(b)
        #expect(Set(y.keys).isSubset(of: Set(x.keys)))
        x.formUnion(y)
        Self.expect(x, holds: Set(a).union(b))
    }

    // MARK: - Single and bulk edits

    @Test("Inserts, removes and lookups agree with Set", arguments: Shape.allCases)
    func edits(shape: Shape) {
        var random = SplitMix64(seed: 7 &+ UInt64(shape.rawValue.count))
        let ids = Self.ids(shape, using: &random)
        var model = Set(ids)
        var bitmap = Self.bitmap(ids, shape, using: &random)
        for step in 0..<3000 {
            // Mostly ids near existing ones, so runs split and merge and containers cross thresholds.
            let base = ids.isEmpty ? 0 : ids[Int(random.next() % UInt64(ids.count))]
            let id = base &+ UInt32(random.next() % 5) &- 2
            if random.next() % 2 == 0 {
                let inserted = bitmap.insert(id)
                #expect(inserted == model.insert(id).inserted)
            } else {
                let removed = bitmap.remove(id)
                #expect(removed == (model.remove(id) != nil))
            }
            #expect(bitmap.contains(id) == model.contains(id))
            if step % 500 == 0 { Self.expect(bitmap, holds: model) }
        }
        for _ in 0..<2000 {
            let probe = UInt32(truncatingIfNeeded: random.next() % UInt64(Self.chunks << 16 + 10))
            #expect(bitmap.contains(probe) == model.contains(probe))
        }
        Self.expect(bitmap, holds: model)
        for id in model { bitmap.remove(id) }
        Self.expect(bitmap, holds: [])
        #expect(bitmap == RoaringBitmap())
    }

    @Test("Bulk inserts and removes agree with Set, small batches and large", arguments: Shape.allCases)
    func bulkEdits(shape: Shape) {
        var random = SplitMix64(seed: 11 &+ UInt64(shape.rawValue.count))
        var model = Set<UInt32>()
        var bitmap = RoaringBitmap()
        for round in 0..<6 {
            let batch = Self.ids(shape, using: &random)
            let slice = round % 2 == 0 ? Array(batch.prefix(10)) : batch
            if round % 3 == 2 {
                bitmap.remove(contentsOf: slice)
                model.subtract(slice)
            } else {
                bitmap.insert(contentsOf: slice)
                model.formUnion(slice)
            }
            Self.expect(bitmap, holds: model)
        }
        bitmap.remove(contentsOf: Array(model))
        Self.expect(bitmap, holds: [])
    }

    @Test("The three initializers agree, whatever order and duplicates the input has", arguments: Shape.allCases)
    func initializers(shape: Shape) {
        var random = SplitMix64(seed: 13 &+ UInt64(shape.rawValue.count))
        let ids = Self.ids(shape, using: &random)
        let model = Set(ids)
        let unordered = RoaringBitmap(ids + ids.prefix(50))
        let sorted = RoaringBitmap(sortedIDs: model.sorted())
        // Not ascending: the fast path notices and falls back to sorting.
        let misordered = RoaringBitmap(sortedIDs: ids.shuffled(using: &random) + ids.prefix(3))
        Self.expect(unordered, holds: model)
        Self.expect(sorted, holds: model)
        Self.expect(misordered, holds: model)
        #expect(unordered == sorted)
        #expect(misordered == sorted)
        Self.expect(RoaringBitmap([]), holds: [])
        Self.expect(RoaringBitmap(sortedIDs: []), holds: [])
    }

    // MARK: - Container kinds

    @Test("The shapes produce the container kinds they are meant to")
    func shapesCoverKinds() {
        var random = SplitMix64(seed: 5)
        #expect(Set(Self.kinds(RoaringBitmap(Self.ids(.sparse, using: &random)))) == [.array])
        var dense = RoaringBitmap()
        while !Self.kinds(dense).contains(.bitmap) { dense = RoaringBitmap(Self.ids(.dense, using: &random)) }
        var runs = RoaringBitmap(Self.ids(.runs, using: &random))
        runs.runOptimize()
        #expect(Self.kinds(runs).contains(.run))
        var mixed = RoaringBitmap(Self.ids(.mixed, using: &random))
        mixed.runOptimize()
        #expect(Set(Self.kinds(mixed)) == [.array, .bitmap, .run])
    }

    @Test("An array becomes a bitmap past 2,048 ids and an array again at 2,048")
    func arrayBitmapThreshold() {
        var bitmap = RoaringBitmap(sortedIDs: (0..<2048).map { 70_000 + $0 * 3 })
        // Mutating calls stay outside `#expect`, whose expansion cannot mutate.
        var changed: Bool
        #expect(Self.kinds(bitmap) == [.array])
        changed = bitmap.insert(70_001)
        #expect(changed)
        #expect(Self.kinds(bitmap) == [.bitmap])
        changed = bitmap.insert(70_001)
        #expect(!changed)
        #expect(bitmap.count == 2049)
        changed = bitmap.remove(70_000)
        #expect(changed)
        #expect(Self.kinds(bitmap) == [.array])
        #expect(bitmap.count == 2048)
        changed = bitmap.remove(70_000)
        #expect(!changed)
        Self.expectValid(bitmap)

        #expect(Self.kinds(RoaringBitmap(sortedIDs: Array(0..<2049))) == [.bitmap])
        #expect(Self.kinds(RoaringBitmap(sortedIDs: Array(0..<2048))) == [.array])
    }

    @Test("Set algebra picks array or bitmap by the result's size")
    func algebraThresholds() {
        let evens = RoaringBitmap(sortedIDs: (0..<1500).map { $0 * 2 })
        let odds = RoaringBitmap(sortedIDs: (0..<1500).map { $0 * 2 + 1 })
        #expect(Self.kinds(evens.union(odds)) == [.bitmap])
        #expect(evens.union(odds).count == 3000)
        let small = RoaringBitmap(sortedIDs: (0..<1000).map { $0 * 2 })
        #expect(Self.kinds(small.union(evens)) == [.array])

        let many = RoaringBitmap(sortedIDs: Array(0..<20000))
        let others = RoaringBitmap(sortedIDs: Array(19000..<40000))
        #expect(Self.kinds(many) == [.bitmap])
        #expect(Self.kinds(many.intersection(others)) == [.array])
        #expect(many.intersection(others).count == 1000)
        #expect(Self.kinds(many.subtracting(others)) == [.bitmap])
        var formed = many
        formed.subtract(RoaringBitmap(sortedIDs: Array(2000..<20000)))
        #expect(Self.kinds(formed) == [.array])
        #expect(formed.count == 2000)
    }

    @Test("runOptimize converts to runs where they are smaller, and back when edits make them larger")
    func runThresholds() {
        var bitmap = RoaringBitmap(sortedIDs: Array(10..<60_000) + Array(65_536..<65_600) + [200_000, 200_002])
        var changed: Bool
        #expect(Self.kinds(bitmap) == [.bitmap, .array, .array])
        changed = bitmap.runOptimize()
        #expect(changed)
        #expect(Self.kinds(bitmap) == [.run, .run, .array])
        changed = bitmap.runOptimize()
        #expect(!changed)
        let before = bitmap.byteCount

        // Removals split runs; the container stays a run container and stays right.
        var model = Set(bitmap.ids)
        for id in stride(from: UInt32(100), to: 200, by: 7) {
            changed = bitmap.remove(id)
            #expect(changed)
            model.remove(id)
        }
        changed = bitmap.remove(10)
        #expect(changed)
        changed = bitmap.remove(59_999)
        #expect(changed)
        model.subtract([10, 59_999])
        #expect(Self.kinds(bitmap)[0] == .run)
        Self.expect(bitmap, holds: model)
        #expect(bitmap.byteCount > before)

        // Many holes: past 2,048 runs a run container turns into a bitmap on its own.
        for id in stride(from: UInt32(1000), to: 1000 + 2 * 2100, by: 2) {
            bitmap.remove(id)
            model.remove(id)
        }
        #expect(Self.kinds(bitmap)[0] == .bitmap)
        Self.expect(bitmap, holds: model)

        // A run container whose runs stop paying off goes back to array form on runOptimize.
        var small = RoaringBitmap(sortedIDs: Array(0..<1000))
        small.runOptimize()
        #expect(Self.kinds(small) == [.run])
        for id in stride(from: UInt32(0), to: 1000, by: 2) { small.remove(id) }
        #expect(Self.kinds(small) == [.run])
        changed = small.runOptimize()
        #expect(changed)
        #expect(Self.kinds(small) == [.array])
        Self.expect(small, holds: Set(stride(from: UInt32(1), to: 1000, by: 2)))

        // Inserting into a run container merges runs it joins.
        var joined = RoaringBitmap(sortedIDs: Array(0..<100) + Array(101..<200))
        joined.runOptimize()
        #expect(
            joined.containers[0]
                == .run(runs: [RoaringRun(first: 0, last: 99), RoaringRun(first: 101, last: 199)], cardinality: 199))
        joined.insert(100)
        guard case .run(let runs, _) = joined.containers[0] else {
            Issue.record("expected a run container")
            return
        }
        #expect(runs == [RoaringRun(first: 0, last: 199)])
    }

    @Test("A full chunk, and a nearly full one, as runs meet every kind")
    func fullChunk() {
        let holes = Set<UInt32>([1, 65535]).union(30000..<30010)
        for dropped in [[], holes] {
            let model = Set(UInt32(0)..<65536).subtracting(dropped)
            var runs = RoaringBitmap(model)
            runs.runOptimize()
            #expect(Self.kinds(runs) == [.run])
            for other in [
                RoaringBitmap(sortedIDs: [1, 5, 65535, 65536]),
                RoaringBitmap(sortedIDs: Array(0..<10000).map { $0 * 5 }),
            ] {
                let otherModel = Set(other.ids)
                Self.expect(runs.intersection(other), holds: model.intersection(otherModel))
                Self.expect(other.intersection(runs), holds: model.intersection(otherModel))
                Self.expect(runs.union(other), holds: model.union(otherModel))
                Self.expect(other.union(runs), holds: model.union(otherModel))
                Self.expect(runs.subtracting(other), holds: model.subtracting(otherModel))
                Self.expect(other.subtracting(runs), holds: otherModel.subtracting(model))
                #expect(runs.intersectionCount(other) == model.intersection(otherModel).count)
                var formed = other
                formed.formUnion(runs)
                Self.expect(formed, holds: model.union(otherModel))
            }
        }
    }

    // MARK: - Reading in order

    @Test("Pages concatenate to the whole set, and any page starts after its cursor", arguments: Shape.allCases)
    func paging(shape: Shape) {
        var random = SplitMix64(seed: 17 &+ UInt64(shape.rawValue.count))
        let ids = Self.ids(shape, using: &random)
        let sorted = Set(ids).sorted()
        let bitmap = Self.bitmap(ids, shape, using: &random)
        for limit in [1, 37, 4096, 100_000] {
            var paged: [UInt32] = []
            var after: UInt32?
            while true {
                let page = bitmap.ids(after: after, limit: limit)
                #expect(page.count <= limit)
                paged += page
                // A page that fails to advance would loop forever: stop once more came back than exists.
                guard page.count == limit, let last = page.last, paged.count <= sorted.count else { break }
                after = last
            }
            #expect(paged == sorted)
        }
        var cursors: [UInt32] = [0, 65535, 65536, UInt32.max - 1, UInt32.max]
        for _ in 0..<200 { cursors.append(UInt32(random.next() % UInt64(Self.chunks << 16 + 5))) }
        for after in cursors {
            let limit = 1 + Int(random.next() % 300)
            let expected = Array(sorted.drop { $0 <= after }.prefix(limit))
            #expect(bitmap.ids(after: after, limit: limit) == expected)
        }
        #expect(bitmap.ids(after: nil, limit: 0).isEmpty)
        #expect(bitmap.ids(after: UInt32.max, limit: 10).isEmpty)
    }

    // MARK: - Value semantics

    @Test("A write to a copy copies only the container it touches; the original is untouched")
    func copyOnWritePerContainer() {
        var random = SplitMix64(seed: 23)
        let ids = Self.ids(.mixed, using: &random) + Self.ids(.dense, using: &random)
        let original = Self.bitmap(ids, .mixed, using: &random)
        let model = Set(ids)
        var copy = original
        let touched = 1
        let id = UInt32(original.keys[touched]) << 16 | 12345
        let wasPresent = original.contains(id)
        if wasPresent { copy.remove(id) } else { copy.insert(id) }

        #expect(copy.contains(id) != wasPresent)
        Self.expect(original, holds: model)
        #expect(copy.keys == original.keys)
        for index in original.containers.indices {
            let shared = Self.storage(original.containers[index]) == Self.storage(copy.containers[index])
            #expect(shared == (index != touched), "container \(index)")
        }
    }

    /// The address of a container's payload, to tell shared storage from a copy.
    static func storage(_ container: RoaringContainer) -> UInt? {
        switch container {
        case .array(let values): values.withUnsafeBytes { $0.baseAddress.map { UInt(bitPattern: $0) } }
        case .bitmap(let words, _): words.withUnsafeBytes { $0.baseAddress.map { UInt(bitPattern: $0) } }
        case .run(let runs, _): runs.withUnsafeBytes { $0.baseAddress.map { UInt(bitPattern: $0) } }
        }
    }

    @Test("Equal sets are equal and hash alike whatever their container forms", arguments: Shape.allCases)
    func equalityAndHashing(shape: Shape) {
        var random = SplitMix64(seed: 29 &+ UInt64(shape.rawValue.count))
        let ids = Self.ids(shape, using: &random)
        let plain = RoaringBitmap(ids)
        var optimized = plain
        optimized.runOptimize()
        #expect(plain == optimized)
        #expect(plain.hashValue == optimized.hashValue)
        var other = plain
        other.insert(UInt32.max - 2)
        other.remove(ids[0])
        #expect(other != plain)
        #expect(Set([plain, optimized, other]).count == 2)
    }

    @Test("byteCount follows the containers held")
    func byteCount() {
        #expect(RoaringBitmap().byteCount == 0)
        let sparse = RoaringBitmap(sortedIDs: (0..<1000).map { $0 * 1000 })
        let dense = RoaringBitmap(sortedIDs: (0..<1_000_000).filter { $0 % 3 != 0 })
        #expect(sparse.byteCount >= 2000)
        #expect(sparse.byteCount < 2000 + 16 * 1000)
        // About 8 KiB per 65,536 ids, whatever the count.
        #expect(dense.byteCount >= 16 * 8192)
        #expect(dense.byteCount < 16 * (8192 + 200))
        var runs = RoaringBitmap(sortedIDs: Array(0..<1_000_000))
        runs.runOptimize()
        #expect(runs.byteCount < 2000)
    }

    // MARK: - Serialization

    static func decode(_ bytes: [UInt8]) throws(RoaringBitmap.FormatError) -> RoaringBitmap {
        var slice = bytes[...]
        return try RoaringBitmap(deserializing: &slice)
    }

    static func serialized(_ bitmap: RoaringBitmap) -> [UInt8] {
        var bytes: [UInt8] = []
        bitmap.serialize(into: &bytes)
        return bytes
    }

    @Test("Serializing then deserializing gives the same set, forms and trailing bytes", arguments: Shape.allCases)
    func roundTrip(shape: Shape) throws {
        var random = SplitMix64(seed: 31 &+ UInt64(shape.rawValue.count))
        let first = Self.bitmap(Self.ids(shape, using: &random), shape, using: &random)
        let second = Self.bitmap(Self.ids(shape, using: &random), shape, using: &random)
        var bytes: [UInt8] = [0xAB]
        first.serialize(into: &bytes)
        second.serialize(into: &bytes)
        RoaringBitmap().serialize(into: &bytes)
        bytes.append(0xCD)

        var slice = bytes[1...]
        let readFirst = try RoaringBitmap(deserializing: &slice)
        let readSecond = try RoaringBitmap(deserializing: &slice)
        let readEmpty = try RoaringBitmap(deserializing: &slice)
        #expect(Array(slice) == [0xCD])
        #expect(readFirst == first)
        #expect(Self.kinds(readFirst) == Self.kinds(first))
        #expect(Array(readFirst.ids) == Array(first.ids))
        #expect(readSecond == second)
        #expect(readEmpty.isEmpty)
        Self.expectValid(readFirst)
        Self.expectValid(readSecond)
    }

    @Test("Every truncation of a serialized bitmap throws .truncated and consumes nothing")
    func truncation() {
        var random = SplitMix64(seed: 37)
        let mixed = Self.bitmap(Self.ids(.mixed, using: &random), .mixed, using: &random)
        let bytes = Self.serialized(mixed)
        // Every cut in the header and first containers, then a spread through the rest.
        var cuts = Array(0..<Swift.min(bytes.count, 600))
        cuts += stride(from: 600, to: bytes.count, by: 97)
        for cut in cuts {
            var slice = bytes[..<cut]
            #expect(throws: RoaringBitmap.FormatError.truncated) { try RoaringBitmap(deserializing: &slice) }
            #expect(slice.count == cut)
        }
    }

    /// The format does not follow the in-memory tuning: a file written under another array limit
    /// reads the same ids, each chunk in the form this build keeps it.
    @Test("An array past the array limit becomes a bitmap, a bitmap within it an array, with the same ids")
    func formsFollowTheReader() throws {
        let lows = (0..<3000).map { UInt16($0 * 20) }
        var words = [UInt64](repeating: 0, count: 1024)
        for low in [UInt16(3), 70, 4000] { words[Int(low) / 64] |= 1 << (UInt64(low) % 64) }
        let bytes = Self.file(
            Self.container(key: 0, kind: 0, cardinality: 3000, payload: lows.flatMap { Self.le($0) }),
            Self.container(key: 1, kind: 1, cardinality: 3, payload: words.flatMap { Self.le($0) }))
        let bitmap = try Self.decode(bytes)
        #expect(Self.kinds(bitmap) == [.bitmap, .array])
        Self.expect(bitmap, holds: Set(lows.map { UInt32($0) } + [65_539, 65_606, 69_536]))
        Self.expectValid(bitmap)
    }

    /// The message log's recipients were written in version 1, whose arrays held up to 4,096 values.
    @Test("Version 1 bytes still read: an array of 2,049 to 4,096 values becomes a bitmap of the same ids")
    func readsVersion1() throws {
        let lows = (0..<3000).map { UInt16($0 * 20) }
        let payload: [UInt8] = lows.flatMap { Self.le($0) }
        let large: [UInt8] = Self.container(key: 0, kind: 0, cardinality: 3000, payload: payload)
        let small: [UInt8] = Self.container(key: 1, kind: 0, cardinality: 2, payload: Self.le(UInt16(7)) + Self.le(UInt16(9)))
        let header: [UInt8] = [1] + Self.le(UInt32(2))
        var bytes = ArraySlice(header + large + small)
        let bitmap = try RoaringBitmap(deserializing: &bytes)
        #expect(bytes.isEmpty)
        #expect(Self.kinds(bitmap) == [.bitmap, .array])
        let expected: [UInt32] = lows.map { UInt32($0) } + [65_543, 65_545]
        Self.expect(bitmap, holds: Set(expected))
        Self.expectValid(bitmap)
    }

    static func le<T: FixedWidthInteger>(_ value: T) -> [UInt8] {
        withUnsafeBytes(of: value.littleEndian) { Array($0) }
    }

    /// The bytes of one container with the given header fields and payload.
    static func container(key: UInt16, kind: UInt8, cardinality: UInt32, payload: [UInt8]) -> [UInt8] {
        le(key) + [kind] + le(cardinality) + payload
    }

    static func file(_ containers: [UInt8]..., count: UInt32? = nil) -> [UInt8] {
        [2] + le(count ?? UInt32(containers.count)) + containers.flatMap { $0 }
    }

    static func runs(_ runs: [(UInt16, UInt16)]) -> [UInt8] {
        le(UInt16(runs.count)) + runs.flatMap { le($0.0) + le($0.1) }
    }

    /// Bytes broken in one way each, named, with the error they must raise.
    static let corruptions: [(name: String, bytes: [UInt8], error: RoaringBitmap.FormatError)] = {
        let one = container(key: 1, kind: 0, cardinality: 1, payload: le(UInt16(5)))
        let two = container(key: 2, kind: 0, cardinality: 1, payload: le(UInt16(5)))
        func array(_ cardinality: UInt32, _ values: [UInt16]) -> [UInt8] {
            file(container(key: 0, kind: 0, cardinality: cardinality, payload: values.flatMap { le($0) }))
        }
        func bitmap(_ cardinality: UInt32, _ words: [UInt64]) -> [UInt8] {
            file(container(key: 0, kind: 1, cardinality: cardinality, payload: words.flatMap { le($0) }))
        }
        func runContainer(_ cardinality: UInt32, _ list: [(UInt16, UInt16)]) -> [UInt8] {
            file(container(key: 0, kind: 2, cardinality: cardinality, payload: runs(list)))
        }
        var missingBit = [UInt64](repeating: ~0, count: 1024)
        missingBit[100] = ~1
        return [
            ("version 0", [0] + le(UInt32(0)), .unsupportedVersion),
            ("version 3", [3] + le(UInt32(0)), .unsupportedVersion),
            ("version 1 array past a chunk", [1] + le(UInt32(1)) + container(key: 0, kind: 0, cardinality: 65_537, payload: []), .badCardinality),
            ("container count", file(count: 65_537), .tooManyContainers),
            ("count beyond the bytes", file(one, count: 2), .truncated),
            ("equal keys", file(one, one), .unsortedKeys),
            ("descending keys", file(two, one), .unsortedKeys),
            ("kind", file(container(key: 0, kind: 3, cardinality: 1, payload: le(UInt16(5)))), .unknownKind),
            ("empty array", array(0, []), .badCardinality),
            ("array past a chunk", array(65_537, []), .badCardinality),
            ("empty bitmap", bitmap(0, []), .badCardinality),
            ("run past 65,536", runContainer(65_537, []), .badCardinality),
            ("unsorted array", array(3, [12, 9, 3]), .badPayload),
            ("duplicate in array", array(2, [4, 4]), .badPayload),
            ("bitmap popcount", bitmap(65_536, missingBit), .cardinalityMismatch),
            ("no runs", runContainer(1, []), .badPayload),
            ("overlapping runs", runContainer(20, [(0, 9), (5, 9)]), .badPayload),
            ("touching runs", runContainer(20, [(0, 9), (10, 9)]), .badPayload),
            ("run past the chunk", runContainer(10, [(65_530, 9)]), .badPayload),
            ("run lengths", runContainer(11, [(0, 9)]), .cardinalityMismatch),
        ]
    }()

    @Test("Inconsistent bytes throw the matching FormatError", arguments: corruptions.indices)
    func corruption(index: Int) {
        let corruption = Self.corruptions[index]
        #expect(throws: corruption.error, "\(corruption.name)") { try Self.decode(corruption.bytes) }
    }

    @Test("Hand-written bytes in the documented format decode to the ids they describe")
    func documentedFormat() throws {
        let bytes = Self.file(
            Self.container(key: 0, kind: 0, cardinality: 2, payload: Self.le(UInt16(7)) + Self.le(UInt16(300))),
            Self.container(key: 2, kind: 2, cardinality: 4, payload: Self.runs([(10, 2), (65535, 0)])))
        let bitmap = try Self.decode(bytes)
        let chunk2: UInt32 = 2 << 16
        let expected: [UInt32] = [7, 300, chunk2 | 10, chunk2 | 11, chunk2 | 12, chunk2 | 65535]
        #expect(Array(bitmap.ids) == expected)
        #expect(Self.serialized(bitmap) == bytes)
    }

    @Test("Random byte damage either throws or yields a valid bitmap, never a trap", arguments: UInt64(1)...4)
    func randomDamage(seed: UInt64) {
        var random = SplitMix64(seed: seed)
        let shape = Shape.allCases[Int(seed) % Shape.allCases.count]
        let bytes = Self.serialized(Self.bitmap(Self.ids(shape, using: &random), shape, using: &random))
        var outcomes = (thrown: 0, decoded: 0)
        for _ in 0..<300 {
            var damaged = bytes
            for _ in 0...(random.next() % 3) {
                // Half the hits land in the first bytes, where headers are.
                let span = random.next() % 2 == 0 ? Swift.min(64, damaged.count) : damaged.count
                damaged[Int(random.next() % UInt64(span))] ^= UInt8(truncatingIfNeeded: 1 + random.next() % 255)
            }
            do {
                let bitmap = try Self.decode(damaged)
                Self.expectValid(bitmap)
                outcomes.decoded += 1
            } catch {
                outcomes.thrown += 1
            }
        }
        #expect(outcomes.thrown > 0)
    }
}

/// The algebra the index uses (`formUnion`, `subtract`) as values, so that the tests can state
/// laws over them; an intersection is two differences, a − (a − b).
extension RoaringBitmap {
    func union(_ other: RoaringBitmap) -> RoaringBitmap {
        var result = self
        result.formUnion(other)
        return result
    }

    func subtracting(_ other: RoaringBitmap) -> RoaringBitmap {
        var result = self
        result.subtract(other)
        return result
    }

    func intersection(_ other: RoaringBitmap) -> RoaringBitmap {
        subtracting(subtracting(other))
    }

    func intersectionCount(_ other: RoaringBitmap) -> Int {
        intersection(other).count
    }
}
