import Registry

/// A token as it is listed and shown, read the same way by every PostgreSQL statement that shows one.
extension TokenInfo {
    /// The columns `init(postgresRow:)` reads, for a `SELECT` list (unescaped into the query).
    static let postgresColumns =
        #"value, state, "createdAt", "updatedAt", "lastSeenAt", platform, locale, "timeZone", "appVersion""#

    typealias PostgresRow = (String, String, Int64, Int64, Int64?, String?, String?, String?, String?)

    init(postgresRow row: PostgresRow) {
        self.init(
            token: row.0, state: TokenState(rawValue: row.1) ?? .registered, createdAt: EpochMilliseconds.date(row.2),
            updatedAt: EpochMilliseconds.date(row.3), lastSeenAt: row.4.map(EpochMilliseconds.date),
            attributes: TokenAttributes(
                platform: row.5.flatMap(TokenAttributes.Platform.init(rawValue:)), locale: row.6, timeZone: row.7,
                appVersion: row.8))
    }
}
