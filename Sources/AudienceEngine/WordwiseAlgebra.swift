import Conditions

/// A condition evaluated one 65,536-id chunk at a time, over plain 1,024-word bitmaps.
///
/// Combining containers pairwise (as `RoaringBitmap.formUnion` and `subtract` do for the index's
/// updates) would build a new container for every operation of every chunk, and sorted-array containers go through merges. Here each chunk's
/// topic containers are spread into bitmaps once, every `&&`, `||` and `!` is a loop of 1,024
/// word operations (which the compiler vectorizes), and only the chunk's result is kept: counted,
/// listed, or turned into one container. The cost is a few microseconds a chunk whatever the
/// containers hold, so a count over 10 million tokens stays near a millisecond.
struct WordwiseAlgebra {
    /// The registered tokens: what `!` ranges over, and the chunks worth visiting.
    let universe: RoaringBitmap
    let topics: [String: TopicMembers]
    /// A `where` every token reached must also match, applied to each chunk's result.
    var filter: ResolvedAttributeFilter? = nil

    private static let wordCount = RoaringContainer.wordCount

    /// How many tokens `expression` reaches.
    func count(_ expression: Expression) -> Int {
        counts(expression, topics: []).count
    }

    /// How many tokens `expression` reaches and, in the same pass, how many of each of `topics`'
    /// subscribers match the filter: a narrowed count's `topicCounts` cost one more topic spread a
    /// chunk each, not a pass of their own.
    func counts(_ expression: Expression, topics names: [String]) -> (count: Int, topics: [Int]) {
        let parts = inParts { part in
            var total = 0
            var perTopic = [Int](repeating: 0, count: names.count)
            forEachChunk(expression, indices: part, mask: !names.isEmpty) { key, _, cardinality, mask, spare in
                total &+= cardinality
                guard let mask else { return true }
                for (index, name) in names.enumerated() {
                    spread(topics[name], key: key, into: spare)
                    var matching = 0
                    for i in 0..<Self.wordCount { matching &+= (spare[i] & mask[i]).nonzeroBitCount }
                    perTopic[index] &+= matching
                }
                return true
            }
            return (total, perTopic)
        }
        var result = (count: 0, topics: [Int](repeating: 0, count: names.count))
        for part in parts {
            result.count &+= part.0
            for index in names.indices { result.topics[index] &+= part.1[index] }
        }
        return result
    }

    /// The set `expression` reaches.
    func evaluate(_ expression: Expression) -> RoaringBitmap {
        let parts = inParts { part in
            var result = RoaringBitmap()
            forEachChunk(expression, indices: part) { key, words, cardinality, _, _ in
                if let container = RoaringContainer.make(words: Array(words), cardinality: cardinality) {
                    result.keys.append(key)
                    result.containers.append(container)
                }
                return true
            }
            return result
        }
        var result = parts[0]
        for part in parts.dropFirst() {
            result.keys += part.keys
            result.containers += part.containers
        }
        return result
    }

    /// Chunks a single part takes; past it, the work is split over two threads. A count over ten
    /// million tokens (153 chunks) then takes both cores of a small machine for a fraction of a
    /// millisecond.
    private static let chunksPerPart = 32

    /// `body` over the universe's chunk indices, in one part or two run at once (the second on
    /// costly work's helper thread, at the same priority); results in order.
    private func inParts<T: Sendable>(_ body: @escaping @Sendable (Range<Int>) -> T) -> [T] {
        let total = universe.keys.count
        guard total >= 2 &* Self.chunksPerPart else { return [body(0..<total)] }
        let middle = total / 2
        let (first, second) = CostlyWork.inHalves({ body(0..<middle) }, { body(middle..<total) })
        return [first, second]
    }

    /// Up to `limit` ids `expression` reaches, greater than `after`, ascending; only the chunks
    /// the page needs are evaluated.
    func ids(of expression: Expression, after: UInt32?, limit: Int) -> [UInt32] {
        var result: [UInt32] = []
        guard limit > 0 else { return result }
        let first = after.map { UInt16(truncatingIfNeeded: $0 &>> 16) } ?? 0
        forEachChunk(expression, from: first) { key, words, _, _, _ in
            let high = UInt32(key) &<< 16
            var start = 0
            if let after, UInt16(truncatingIfNeeded: after &>> 16) == key {
                start = Int(after & 0xFFFF) &+ 1
            }
            var index = start &>> 6
            while index < Self.wordCount && result.count < limit {
                var bits = words[index]
                if index == start &>> 6 { bits &= ~0 &<< UInt64(start & 63) }
                while bits != 0 && result.count < limit {
                    result.append(high | UInt32(index &<< 6 | bits.trailingZeroBitCount))
                    bits &= bits &- 1
                }
                index &+= 1
            }
            return result.count < limit
        }
        return result
    }

    // MARK: - Chunks

    /// What `forEachChunk` hands its body: the chunk's key, the result's words and their count,
    /// the filter's mask (when asked for) and a spare register.
    private typealias ChunkBody = (
        UInt16, UnsafeMutableBufferPointer<UInt64>, Int, UnsafeMutableBufferPointer<UInt64>?,
        UnsafeMutableBufferPointer<UInt64>
    ) -> Bool

    /// Evaluates `expression` for each chunk of the universe from `first` on, ascending, and
    /// hands each non-empty result to `body` (which returns whether to go on).
    private func forEachChunk(_ expression: Expression, from first: UInt16, _ body: ChunkBody) {
        let start = universe.keyIndex(first)
        forEachChunk(expression, indices: start..<universe.keys.count, body)
    }

    /// The same over the universe's chunks at `indices`. With a filter, its mask (the registered
    /// tokens of the chunk that match it) is made first, and a chunk it leaves empty is not
    /// evaluated at all; `mask` hands it to `body` too (without a filter, the chunk's registered
    /// tokens), and then every chunk it leaves something in goes to `body`, even one where the
    /// expression reaches nothing.
    private func forEachChunk(
        _ expression: Expression, indices: Range<Int>, mask handsMask: Bool = false, _ body: ChunkBody
    ) {
        if filter?.matchesNothing == true { return }
        // One register for the universe and one per level of the tree; for a `where`, its mask
        // and two scratch registers; a spare one for the body.
        let levels = Self.depth(expression) &+ 2
        let registers = levels &+ 4
        let storage = UnsafeMutableBufferPointer<UInt64>.allocate(capacity: registers &* Self.wordCount)
        defer { storage.deallocate() }
        func register(_ index: Int) -> UnsafeMutableBufferPointer<UInt64> {
            UnsafeMutableBufferPointer(rebasing: storage[(index &* Self.wordCount)..<((index &+ 1) &* Self.wordCount)])
        }
        let universeWords = register(0)
        let (maskWords, spare) = (register(levels), register(levels &+ 3))
        let needsUniverse = Self.needsUniverse(expression) || filter != nil || handsMask
        for index in indices {
            let key = universe.keys[index]
            if needsUniverse { universe.containers[index].spread(into: universeWords) }
            if let filter {
                _ = maskWords.update(fromContentsOf: universeWords)
                filter.narrow(key: key, maskWords, scratch: register(levels &+ 1), spare: register(levels &+ 2))
                if !maskWords.contains(where: { $0 != 0 }) { continue }
            }
            let result = register(1)
            evaluate(expression, key: key, into: 1, universe: universeWords, register: register)
            if filter != nil { for i in 0..<Self.wordCount { result[i] &= maskWords[i] } }
            var cardinality = 0
            for word in result { cardinality &+= word.nonzeroBitCount }
            let mask = handsMask ? (filter != nil ? maskWords : universeWords) : nil
            if cardinality > 0 || mask != nil, !body(key, result, cardinality, mask, spare) { return }
        }
    }

    /// Writes the chunk `key` of `expression` into register `target`, using the registers above
    /// it for operands.
    private func evaluate(
        _ expression: Expression, key: UInt16, into target: Int, universe: UnsafeMutableBufferPointer<UInt64>,
        register: (Int) -> UnsafeMutableBufferPointer<UInt64>
    ) {
        let out = register(target)
        switch expression {
        case .topic(let name, _):
            spread(topics[name], key: key, into: out)
        case .not(let operand, _):
            evaluate(operand, key: key, into: target, universe: universe, register: register)
            for i in 0..<Self.wordCount { out[i] = universe[i] & ~out[i] }
        case .and(let operands, _):
            let negated = operands.compactMap { operand -> Expression? in
                if case .not(let inner, _) = operand { inner } else { nil }
            }
            let plain = operands.filter { if case .not = $0 { false } else { true } }
            if let head = plain.first {
                evaluate(head, key: key, into: target, universe: universe, register: register)
            } else {
                _ = out.update(fromContentsOf: universe)
            }
            for other in plain.dropFirst() {
                combine(other, .intersect, key: key, into: target, universe: universe, register: register)
            }
            // a && !b is a − b: the complement of b is never built.
            for inner in negated {
                combine(inner, .subtract, key: key, into: target, universe: universe, register: register)
            }
        case .or(let operands, _):
            evaluate(operands[0], key: key, into: target, universe: universe, register: register)
            for other in operands.dropFirst() {
                combine(other, .unite, key: key, into: target, universe: universe, register: register)
            }
        }
    }

    private enum Operation { case intersect, unite, subtract }

    /// Combines register `target` with `operand`. A topic is read from its container where it
    /// lies (a bitmap's words, an array's values), without copying it into a register first.
    private func combine(
        _ operand: Expression, _ operation: Operation, key: UInt16, into target: Int,
        universe: UnsafeMutableBufferPointer<UInt64>, register: (Int) -> UnsafeMutableBufferPointer<UInt64>
    ) {
        let out = register(target)
        if case .topic(let name, _) = operand, let members = topics[name], case .large(let bitmap) = members {
            switch (bitmap.container(forKey: key), operation) {
            case (nil, .intersect):
                out.update(repeating: 0)
                return
            case (nil, .unite), (nil, .subtract):
                return
            case (.bitmap(let words, _)?, _):
                words.withUnsafeBufferPointer { words in Self.apply(operation, words, to: out) }
                return
            case (.array(let values)?, .unite):
                values.withUnsafeBufferPointer { values in
                    for value in values { out[Int(value &>> 6)] |= 1 &<< UInt64(value & 63) }
                }
                return
            case (.array(let values)?, .subtract):
                values.withUnsafeBufferPointer { values in
                    for value in values { out[Int(value &>> 6)] &= ~(1 &<< UInt64(value & 63)) }
                }
                return
            default:
                break
            }
        }
        evaluate(operand, key: key, into: target &+ 1, universe: universe, register: register)
        Self.apply(operation, UnsafeBufferPointer(register(target &+ 1)), to: out)
    }

    private static func apply(
        _ operation: Operation, _ words: UnsafeBufferPointer<UInt64>, to out: UnsafeMutableBufferPointer<UInt64>
    ) {
        switch operation {
        case .intersect: for i in 0..<wordCount { out[i] &= words[i] }
        case .unite: for i in 0..<wordCount { out[i] |= words[i] }
        case .subtract: for i in 0..<wordCount { out[i] &= ~words[i] }
        }
    }

    /// A topic's members in chunk `key`, as bits; none for a topic nobody is subscribed to.
    private func spread(_ members: TopicMembers?, key: UInt16, into words: UnsafeMutableBufferPointer<UInt64>) {
        if let members {
            members.spread(chunk: key, into: words)
        } else {
            words.update(repeating: 0)
        }
    }

    /// Whether some `!` is not the operand of an `&&` with a plain operand (those become a
    /// subtraction): only then is the universe read.
    private static func needsUniverse(_ expression: Expression) -> Bool {
        switch expression {
        case .topic: return false
        case .not: return true
        case .and(let operands, _):
            let plain = operands.filter { if case .not = $0 { false } else { true } }
            if plain.isEmpty { return true }
            return operands.contains { operand in
                if case .not(let inner, _) = operand { needsUniverse(inner) } else { needsUniverse(operand) }
            }
        case .or(let operands, _):
            return operands.contains(where: needsUniverse)
        }
    }

    /// Levels of nesting below the root, for the registers evaluation needs.
    private static func depth(_ expression: Expression) -> Int {
        switch expression {
        case .topic: 0
        case .not(let operand, _): depth(operand)
        case .and(let operands, _), .or(let operands, _): 1 &+ (operands.map(depth).max() ?? 0)
        }
    }
}
