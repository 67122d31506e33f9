import AudienceEngine
import Foundation

/// A token's attributes as the change feed carries them to the audience index: what the table
/// holds, the last-seen time to the day.
extension IndexedAttributes {
    public init(_ attributes: TokenAttributes, lastSeenAt: Date) {
        self.init(
            platform: attributes.platform?.rawValue, locale: attributes.locale, timeZone: attributes.timeZone,
            appVersion: attributes.appVersion, seenDay: SeenDay.of(secondsSince1970: lastSeenAt.timeIntervalSince1970))
    }

    public init(_ info: TokenInfo) {
        self.init(info.attributes, lastSeenAt: info.lastSeenAt)
    }
}

extension SeenDay {
    /// The day a time in milliseconds since the epoch falls on (as the tables keep times).
    public static func of(milliseconds: Int64) -> Int32 {
        Int32(clamping: milliseconds >= 0 ? milliseconds / 86_400_000 : (milliseconds + 1) / 86_400_000 - 1)
    }
}
