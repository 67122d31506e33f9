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
