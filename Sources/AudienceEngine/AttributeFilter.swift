/// What a `where` narrows an audience to, in the audience index's terms: every key optional, the
/// values of a key alternatives, the keys combined with and. A token missing an attribute never
/// matches a key that filters on it.
public struct AttributeFilter: Sendable, Hashable {
    /// Platforms by their wire names (`android`, `ios`, `web`); `nil`: any.
    public var platforms: [String]?
    /// RFC 4647 basic language ranges, lowercased (`fr` matches `fr`, `fr-ca`, never `frr`); `nil`: any.
    public var localeRanges: [String]?
    /// IANA zone names as stored; `nil`: any.
    public var timeZones: [String]?
    /// Inclusive bounds on the app version, compared number by number (a missing number is 0).
    public var appVersion: VersionRange?
    /// Only tokens last seen on this UTC day (days since 1970-01-01) or later; `nil`: any.
    public var seenOnOrAfterDay: Int32?

    public init(
        platforms: [String]? = nil, localeRanges: [String]? = nil, timeZones: [String]? = nil,
        appVersion: VersionRange? = nil, seenOnOrAfterDay: Int32? = nil
    ) {
        self.platforms = platforms
        self.localeRanges = localeRanges
        self.timeZones = timeZones
        self.appVersion = appVersion
        self.seenOnOrAfterDay = seenOnOrAfterDay
    }

    /// Whether the filter narrows nothing.
    public var isEmpty: Bool {
        platforms == nil && localeRanges == nil && timeZones == nil && appVersion == nil && seenOnOrAfterDay == nil
    }
}

/// Inclusive bounds on dotted-number versions; either may be absent.
public struct VersionRange: Sendable, Hashable {
    /// The version's numbers (`5.12.0` is `[5, 12, 0]`).
    public var min: [Int]?
    public var max: [Int]?

    public init(min: [Int]? = nil, max: [Int]? = nil) {
        self.min = min
        self.max = max
    }
}

extension VersionRange {
    /// Whether `version` lies within the bounds.
    public func contains(_ version: [Int]) -> Bool {
        if let min, Self.compare(version, min) < 0 { return false }
        if let max, Self.compare(version, max) > 0 { return false }
        return true
    }

    /// Compares dotted-number versions number by number, a missing number counting as 0 (`5.1`
    /// equals `5.1.0`): negative when `a` is lower, zero when equal, positive when higher.
    public static func compare(_ a: [Int], _ b: [Int]) -> Int {
        for index in 0..<Swift.max(a.count, b.count) {
            let (x, y) = (index < a.count ? a[index] : 0, index < b.count ? b[index] : 0)
            if x != y { return x < y ? -1 : 1 }
        }
        return 0
    }
}

/// The unit the index keeps last-seen times in: whole days since 1970-01-01, in UTC.
public enum SeenDay {
    /// The day a time `seconds` after 1970-01-01T00:00:00Z falls on.
    public static func of(secondsSince1970 seconds: Double) -> Int32 {
        Int32((seconds / 86_400).rounded(.down))
    }
}
