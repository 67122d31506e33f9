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
