import AudienceEngine
import Foundation

/// Reads a logged message's recipient ids after a cursor out of its `messageRecipientChunk` rows,
/// which a store feeds it in chunk order until it `wantsMore` no longer: the store runs the
/// statement, the walk knows the chunks.
public struct RecipientWalk: Sendable {
    private let cursor: UInt32?
    private let limit: Int
    public private(set) var ids: [UInt32] = []
    /// The first chunk to read; `nil` when there is nothing to read, because the cursor (a
    /// position from a page token a client made up) is past every token id.
    public let firstChunk: Int64?

    /// - Parameter cursor: the last id already walked; -1 from the start.
    public init(after cursor: Int64, limit: Int) {
        self.limit = limit
        guard cursor < Int64(UInt32.max) else {
            (self.cursor, firstChunk) = (nil, nil)
            return
        }
        self.cursor = cursor < 0 ? nil : UInt32(cursor)
        firstChunk = self.cursor.map { Int64(RoaringBitmap.chunk(of: $0)) } ?? 0
    }

    public var wantsMore: Bool { firstChunk != nil && ids.count < limit }

    /// Takes the ids after the cursor from one chunk's serialized bitmap; one that does not
    /// decode is passed over.
    public mutating func read(_ chunk: Data) {
        var bytes = [UInt8](chunk)[...]
        guard let bitmap = try? RoaringBitmap(deserializing: &bytes) else { return }
        ids += bitmap.ids(after: cursor, limit: limit - ids.count)
    }
}
