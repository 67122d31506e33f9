extension TokenAttributeIndex {
    /// Builds a project's attribute index from its token rows, as a store reads them at start-up.
    ///
    /// Rows come in ascending id order; each 65,536-id chunk's ids wait in arrays per value until
    /// the chunk ends, then become one container each, so no more than a chunk's worth of ids is
    /// ever held twice.
    public struct Builder {
        private var index = TokenAttributeIndex()
        private var chunk: UInt16?
        /// The current chunk's ids per value: platforms, locales, time zones, app versions.
        private var pending = [[String: [UInt32]]](repeating: [:], count: 4)
        /// The current chunk's ids per day slice.
        private var pendingSlices = [[UInt32]](repeating: [], count: DaySlices.bits)

        public init() {}

        /// Adds a token's row.
        public mutating func add(
            _ token: UInt32, platform: String?, locale: String?, timeZone: String?, appVersion: String?,
            seenDay: Int32
        ) {
            let key = RoaringBitmap.chunk(of: token)
            if key != chunk {
                flush()
                chunk = key
            }
            if let platform { pending[0][platform, default: []].append(token) }
            // Lowercased once per value and chunk, at the flush, not once per token.
            if let locale { pending[1][locale, default: []].append(token) }
            if let timeZone { pending[2][timeZone, default: []].append(token) }
            if let appVersion { pending[3][appVersion, default: []].append(token) }
            var bits = DaySlices.stored(seenDay)
            index.seen.highest = max(index.seen.highest, bits)
            while bits != 0 {
                pendingSlices[bits.trailingZeroBitCount].append(token)
                bits &= bits &- 1
            }
        }

        /// The index of every row added.
        public mutating func finish() -> TokenAttributeIndex {
            flush()
            return index
        }

        private mutating func flush() {
            for (attribute, values) in pending.enumerated() {
                for (value, ids) in values {
                    switch attribute {
                    case 0: Self.append(ids, to: &index.platforms[value, default: RoaringBitmap()])
                    case 1: Self.append(ids, to: &index.locales[value.lowercased(), default: RoaringBitmap()])
                    case 2: Self.append(ids, to: &index.timeZones[value, default: RoaringBitmap()])
                    default: Self.append(ids, to: &index.appVersions[value, default: RoaringBitmap()])
                    }
                }
                pending[attribute] = [:]
            }
            for bit in pendingSlices.indices where !pendingSlices[bit].isEmpty {
                Self.append(pendingSlices[bit], to: &index.seen.slices[bit])
                pendingSlices[bit] = []
            }
        }

        /// Adds one chunk's ascending ids: appended as a container when the chunk comes after
        /// every one the bitmap has (rows read in id order), merged otherwise.
        private static func append(_ ids: [UInt32], to bitmap: inout RoaringBitmap) {
            var part = RoaringBitmap(sortedIDs: ids)
            part.runOptimize()
            if let last = bitmap.keys.last, let first = part.keys.first, last >= first {
                bitmap.formUnion(part)
            } else {
                bitmap.keys += part.keys
                bitmap.containers += part.containers
            }
        }
    }
}
