/// A token's attributes as the audience index keeps them: the four a `where` filters on, and the
/// UTC day the token was last seen.
public struct IndexedAttributes: Sendable, Hashable, Codable {
    /// `android`, `ios` or `web`.
    public var platform: String?
    /// A BCP 47 tag, lowercased: language ranges match it regardless of case.
    public var locale: String?
    /// An IANA zone name, as stored.
    public var timeZone: String?
    /// Dotted numbers, as stored (`5.12.0`).
    public var appVersion: String?
    /// The day last seen (``SeenDay``): `lastSeenAt`, else the row's `updatedAt`, as freshness reads it.
    public var seenDay: Int32

    public init(platform: String?, locale: String?, timeZone: String?, appVersion: String?, seenDay: Int32) {
        self.platform = platform
        self.locale = locale?.lowercased()
        self.timeZone = timeZone
        self.appVersion = appVersion
        self.seenDay = seenDay
    }
}

/// What the audience index knows of one project's tokens beyond their subscriptions: a bitmap per
/// value of each attribute (every `ios` token, every `fr-ca` token, …) and the last-seen day as bit
/// slices (``DaySlices``). A `where` is then a few bitmap operations per 65,536-token chunk, done
/// alongside the condition's own, never a look at each token.
///
/// Kept for every token of the project, registered or not, as the table keeps them; what a query
/// reaches is always within the registered tokens, so an unregistered token's attributes never
/// count.
public struct TokenAttributeIndex: Sendable {
    var platforms: [String: RoaringBitmap] = [:] { didSet { unions = ValueUnions() } }
    var locales: [String: RoaringBitmap] = [:] { didSet { unions = ValueUnions() } }
    var timeZones: [String: RoaringBitmap] = [:] { didSet { unions = ValueUnions() } }
    var appVersions: [String: RoaringBitmap] = [:] { didSet { unions = ValueUnions() } }
    var seen = DaySlices()
    /// The unions of value bitmaps `where`s have asked for; replaced whenever a value bitmap changes.
    private var unions = ValueUnions()

    public init() {}

    /// Sets each of `tokens` to its whole attributes (`values[i]` is `tokens[i]`'s), whatever it
    /// had: a token leaves every value bitmap of an attribute but its new value's.
    mutating func describe(_ listed: [UInt32], as listedValues: [IndexedAttributes]) {
        guard !listed.isEmpty, listed.count == listedValues.count else { return }
        // A token listed twice takes its last values.
        var last: [UInt32: Int] = [:]
        for (index, token) in listed.enumerated() { last[token] = index }
        let kept = listed.indices.filter { last[listed[$0]] == $0 }
        let tokens = kept.map { listed[$0] }
        let values = kept.map { listedValues[$0] }
        let leaving = RoaringBitmap(tokens)
        Self.reassign(&platforms, leaving: leaving, tokens, values.map(\.platform))
        Self.reassign(&locales, leaving: leaving, tokens, values.map(\.locale))
        Self.reassign(&timeZones, leaving: leaving, tokens, values.map(\.timeZone))
        Self.reassign(&appVersions, leaving: leaving, tokens, values.map(\.appVersion))
        var byDay: [Int32: [UInt32]] = [:]
        for (token, value) in zip(tokens, values) { byDay[value.seenDay, default: []].append(token) }
        for (day, ids) in byDay { seen.set(ids, to: day) }
    }

    /// Records that `tokens` were seen on `day`.
    mutating func see(_ tokens: [UInt32], on day: Int32) {
        seen.set(tokens, to: day)
    }

    private static func reassign(
        _ bitmaps: inout [String: RoaringBitmap], leaving: RoaringBitmap, _ tokens: [UInt32], _ values: [String?]
    ) {
        // Distinct values are few (platforms, languages, zones, versions in use), so taking the
        // tokens out of each costs a few container operations per value.
        for value in Array(bitmaps.keys) {
            bitmaps[value]!.subtract(leaving)
            if bitmaps[value]!.keys.isEmpty { bitmaps[value] = nil }
        }
        var joining: [String: [UInt32]] = [:]
        for (token, value) in zip(tokens, values) {
            if let value { joining[value, default: []].append(token) }
        }
        for (value, ids) in joining { bitmaps[value, default: RoaringBitmap()].insert(contentsOf: ids) }
    }

    /// `filter` in terms of this index's bitmaps: for each key, the one bitmap of the values it
    /// accepts, a union kept for the next request when it spans several.
    func resolve(_ filter: AttributeFilter) -> ResolvedAttributeFilter {
        var anyOf: [[RoaringBitmap]] = []
        if let names = filter.platforms.map(Set.init) {
            anyOf.append(accepted("platform", platforms.filter { names.contains($0.key) }))
        }
        if let ranges = filter.localeRanges {
            anyOf.append(accepted("locale", locales.filter { tag, _ in ranges.contains { tag == $0 || tag.hasPrefix($0 + "-") } }))
        }
        if let names = filter.timeZones.map(Set.init) {
            anyOf.append(accepted("timeZone", timeZones.filter { names.contains($0.key) }))
        }
        if let range = filter.appVersion {
            anyOf.append(
                accepted(
                    "appVersion",
                    appVersions.filter { version, _ in range.contains(version.split(separator: ".").compactMap { Int($0) }) }))
        }
        return ResolvedAttributeFilter(anyOf: anyOf, seenOnOrAfterDay: filter.seenOnOrAfterDay, seen: seen)
    }

    /// The bitmaps of the values a key accepts: none, one, or the union of several.
    private func accepted(_ attribute: String, _ values: [String: RoaringBitmap]) -> [RoaringBitmap] {
        guard values.count > 1 else { return Array(values.values) }
        let key = ([attribute] + values.keys.sorted()).joined(separator: "\u{0}")
        return [unions.union(of: Array(values.values), key: key)]
    }

    /// What a token is listed with in the index (for tests and checks by hand); `nil` fields are unknown.
    public func attributes(of token: UInt32) -> IndexedAttributes {
        func value(_ bitmaps: [String: RoaringBitmap]) -> String? {
            bitmaps.first { $0.value.contains(token) }?.key
        }
        return IndexedAttributes(
            platform: value(platforms), locale: value(locales), timeZone: value(timeZones),
            appVersion: value(appVersions), seenDay: seen.day(of: token))
    }

    /// Heap bytes held, estimated.
    var byteCount: Int {
        var total = seen.slices.reduce(0) { $0 + $1.byteCount }
        for bitmaps in [platforms, locales, timeZones, appVersions] {
            for (value, bitmap) in bitmaps { total += value.utf8.count + bitmap.byteCount }
        }
        return total
    }

    // MARK: - Checkpoint

    /// The attribute bitmaps by name, in the order a checkpoint writes them.
    var namedBitmaps: [[String: RoaringBitmap]] {
        get { [platforms, locales, timeZones, appVersions] }
        set { (platforms, locales, timeZones, appVersions) = (newValue[0], newValue[1], newValue[2], newValue[3]) }
    }
}

/// A filter resolved against one project's ``TokenAttributeIndex``: for each key filtered on, the
/// bitmaps of the values it accepts (a token must be in one of them), and the last-seen bound.
struct ResolvedAttributeFilter: Sendable {
    var anyOf: [[RoaringBitmap]]
    var seenOnOrAfterDay: Int32?
    var seen: DaySlices

    /// Whether no token can match: some key accepts no value any token has.
    var matchesNothing: Bool { anyOf.contains { $0.isEmpty } }

    /// Whether `token` matches.
    func matches(_ token: UInt32) -> Bool {
        for bitmaps in anyOf where !bitmaps.contains(where: { $0.contains(token) }) { return false }
        if let day = seenOnOrAfterDay, seen.day(of: token) < day { return false }
        return true
    }

    /// Narrows chunk `key`'s bits in `words` to the tokens that match, with two scratch registers.
    func narrow(
        key: UInt16, _ words: UnsafeMutableBufferPointer<UInt64>, scratch: UnsafeMutableBufferPointer<UInt64>,
        spare: UnsafeMutableBufferPointer<UInt64>
    ) {
        let count = RoaringContainer.wordCount
        for bitmaps in anyOf {
            if bitmaps.count == 1 {
                guard let container = bitmaps[0].container(forKey: key) else {
                    words.update(repeating: 0)
                    return
                }
                container.withWords(spare) { bits in for i in 0..<count { words[i] &= bits[i] } }
                continue
            }
            scratch.update(repeating: 0)
            for bitmap in bitmaps {
                bitmap.container(forKey: key)?.unite(into: scratch)
            }
            for i in 0..<count { words[i] &= scratch[i] }
        }
        if let day = seenOnOrAfterDay {
            seen.keep(onOrAfter: day, key: key, words, greater: scratch, spare: spare)
        }
    }
}

extension RoaringContainer {
    /// Sets the container's values in `words`, leaving the other bits as they are: an array's
    /// values one by one, a run's words whole, without spreading the container first.
    @inline(__always)
    func unite(into words: UnsafeMutableBufferPointer<UInt64>) {
        switch self {
        case .bitmap(let bits, _):
            bits.withUnsafeBufferPointer { bits in for i in 0..<RoaringContainer.wordCount { words[i] |= bits[i] } }
        case .array(let values):
            values.withUnsafeBufferPointer { values in
                for value in values { words[Int(value &>> 6)] |= 1 &<< UInt64(value & 63) }
            }
        case .run(let runs, _):
            for run in runs { Self.forEachWord(run) { words[$0] |= $1 } }
        }
    }

    /// Calls `body` with the container's values as 1,024 words: a bitmap's own, or `spare` filled.
    @inline(__always)
    func withWords<R>(_ spare: UnsafeMutableBufferPointer<UInt64>, _ body: (UnsafeBufferPointer<UInt64>) -> R) -> R {
        if case .bitmap(let words, _) = self {
            return words.withUnsafeBufferPointer(body)
        }
        spread(into: spare)
        return body(UnsafeBufferPointer(spare))
    }
}
