import Foundation

/// Whom a logged message reached, as every store keeps it: one row per 65,536-id chunk of token
/// ids, holding that chunk's ids as a serialized bitmap, so that "the messages that reached this
/// token" reads only the rows of the token's chunk.
public enum RecipientChunks {
    /// A recipient set cut into chunks, each serialized: done before the write, off the writer's time.
    public static func chunks(of recipients: RoaringBitmap) -> [(chunk: Int64, ids: Data)] {
        recipients.chunks.map { chunk, ids in
            var bytes: [UInt8] = []
            ids.serialize(into: &bytes)
            return (Int64(chunk), Data(bytes))
        }
    }

    /// Whether a chunk's serialized ids hold `token`.
    public static func contains(_ token: UInt32, in blob: Data) -> Bool {
        var bytes = [UInt8](blob)[...]
        return (try? RoaringBitmap(deserializing: &bytes))?.contains(token) ?? false
    }
}
