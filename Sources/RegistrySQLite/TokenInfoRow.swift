import GRDB
import Registry

/// A token as it is listed and shown, read the same way by every SQLite statement that shows one.
extension TokenInfo {
    /// The columns `init(sqliteRow:)` reads, for a `SELECT` list.
    static let sqliteColumns = "value, state, createdAt, updatedAt, lastSeenAt, platform, locale, timeZone, appVersion"

    init(sqliteRow row: Row) {
        self.init(
            token: row["value"], state: TokenState(rawValue: row["state"]) ?? .registered,
            createdAt: EpochMilliseconds.date(row["createdAt"]), updatedAt: EpochMilliseconds.date(row["updatedAt"]),
            lastSeenAt: (row["lastSeenAt"] as Int64?).map(EpochMilliseconds.date),
            attributes: TokenAttributes(
                platform: (row["platform"] as String?).flatMap(TokenAttributes.Platform.init(rawValue:)),
                locale: row["locale"], timeZone: row["timeZone"], appVersion: row["appVersion"]))
    }
}
