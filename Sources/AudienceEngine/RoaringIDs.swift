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
