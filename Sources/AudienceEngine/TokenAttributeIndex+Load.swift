extension TokenAttributeIndex {
    /// Builds a project's attribute index from its token rows, as a store reads them at start-up.
    ///
    /// Rows come in ascending id order; each 65,536-id chunk's ids wait in arrays per value until
    /// the chunk ends, then become one container each, so no more than a chunk's worth of ids is
    /// ever held twice.
    public struct Builder {
        private var index = TokenAttributeIndex()
        private var chunk: UInt16?
        /// Per attribute (platform, locale, time zone, app version): the values met so far.
        private var values = [ValueInterner](repeating: ValueInterner(), count: 4)
        /// Per attribute: the current chunk's ids, by value ordinal.
        private var pending = [[[UInt32]]](repeating: [], count: 4)
        /// The current chunk's ids per day slice.
        private var pendingSlices = [[UInt32]](repeating: [], count: DaySlices.bits)

        public init() {}

        /// Adds a token's row.
        public mutating func add(
            _ token: UInt32, platform: String?, locale: String?, timeZone: String?, appVersion: String?,
            seenDay: Int32
        ) {
            begin(token)
            if let platform { note(token, 0, values[0].ordinal(of: platform)) }
            if let locale { note(token, 1, values[1].ordinal(of: locale)) }
            if let timeZone { note(token, 2, values[2].ordinal(of: timeZone)) }
            if let appVersion { note(token, 3, values[3].ordinal(of: appVersion)) }
            see(token, seenDay)
        }

        /// Adds a token's row with its attributes as UTF-8 bytes (`nil` for none) in the order
        /// platform, locale, time zone, app version: as a store reads them, without making a string
        /// of each.
        public mutating func add(
            _ token: UInt32,
            utf8 attributes: (UnsafeRawBufferPointer?, UnsafeRawBufferPointer?, UnsafeRawBufferPointer?, UnsafeRawBufferPointer?),
            seenDay: Int32
        ) {
            begin(token)
            if let value = attributes.0 { note(token, 0, values[0].ordinal(of: value)) }
            if let value = attributes.1 { note(token, 1, values[1].ordinal(of: value)) }
            if let value = attributes.2 { note(token, 2, values[2].ordinal(of: value)) }
            if let value = attributes.3 { note(token, 3, values[3].ordinal(of: value)) }
            see(token, seenDay)
        }

        /// The index of every row added.
        public mutating func finish() -> TokenAttributeIndex {
            flush()
            return index
        }

        private mutating func begin(_ token: UInt32) {
            let key = RoaringBitmap.chunk(of: token)
            if key != chunk {
                flush()
                chunk = key
            }
        }

        private mutating func note(_ token: UInt32, _ attribute: Int, _ ordinal: Int) {
            if ordinal == pending[attribute].count { pending[attribute].append([]) }
            pending[attribute][ordinal].append(token)
        }

        private mutating func see(_ token: UInt32, _ seenDay: Int32) {
            var bits = DaySlices.stored(seenDay)
            index.seen.highest = max(index.seen.highest, bits)
            while bits != 0 {
                pendingSlices[bits.trailingZeroBitCount].append(token)
                bits &= bits &- 1
            }
        }

        private mutating func flush() {
            for attribute in pending.indices {
                for ordinal in pending[attribute].indices where !pending[attribute][ordinal].isEmpty {
                    let ids = pending[attribute][ordinal]
                    pending[attribute][ordinal] = []
                    let value = values[attribute].values[ordinal]
                    switch attribute {
                    case 0: Self.append(ids, to: &index.platforms[value, default: RoaringBitmap()])
                    // Lowercased once per value and chunk, not once per token.
                    case 1: Self.append(ids, to: &index.locales[value.lowercased(), default: RoaringBitmap()])
                    case 2: Self.append(ids, to: &index.timeZones[value, default: RoaringBitmap()])
                    default: Self.append(ids, to: &index.appVersions[value, default: RoaringBitmap()])
                    }
                }
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
