import Synchronization

/// The unions a `where` asks of one project's attribute bitmaps, kept until those bitmaps change.
///
/// A key that accepts many values (a language range over a dozen regional tags, an app-version
/// range over sixty releases) would otherwise OR each value's container in every chunk of every
/// count. The union is made by the first request that needs it and read as one bitmap after.
/// ``TokenAttributeIndex`` starts a new, empty one whenever a value bitmap changes, so a union
/// never outlives the bitmaps it was made of; a token seen again changes none of them.
final class ValueUnions: Sendable {
    /// Unions kept at most per project: a dashboard's handful of audiences. Each is at worst a
    /// bitmap of every token of the project (1.2 MiB at 10M).
    static let limit = 16
    private let unions = Mutex<[String: RoaringBitmap]>([:])

    /// The union of `bitmaps`, the ones a key accepts, named by `key`.
    func union(of bitmaps: [RoaringBitmap], key: String) -> RoaringBitmap {
        if let kept = unions.withLock({ $0[key] }) { return kept }
        var union = RoaringBitmap()
        for bitmap in bitmaps { union.formUnion(bitmap) }
        unions.withLock { kept in
            if kept.count >= Self.limit { kept.remove(at: kept.startIndex) }
            kept[key] = union
        }
        return union
    }
}
