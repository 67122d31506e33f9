import Foundation

/// What a token says about its device, as the app server tells it (`PUT /api/tokens/{token}`,
/// `tokens:batchUpdate`): the attributes a sender targets by, as Azure Notification Hubs'
/// installations and OneSignal's subscriptions keep them. Each is optional: a token the app server
/// never described has none.
public struct TokenAttributes: Sendable, Hashable, Codable {
    public var platform: Platform?
    /// A BCP 47 language tag as the app reported it (`fr-CA`), its case kept.
    public var locale: String?
    /// An IANA time zone name (`Europe/Paris`).
    public var timeZone: String?
    /// The app's version, dotted numbers (`5.12.0`).
    public var appVersion: String?

    public init(platform: Platform? = nil, locale: String? = nil, timeZone: String? = nil, appVersion: String? = nil) {
        self.platform = platform
        self.locale = locale
        self.timeZone = timeZone
        self.appVersion = appVersion
    }

    /// The device's platform, by the names FCM's documentation uses for its clients.
    public enum Platform: String, Sendable, Hashable, Codable, CaseIterable {
        case android, ios, web
    }
}

/// A change to a token's attributes: each field kept, cleared or set. A field a request leaves out
/// keeps its value; `null` clears it.
public struct TokenAttributeChange: Sendable, Hashable {
    public enum Field<Value: Sendable & Hashable>: Sendable, Hashable {
        case keep
        case clear
        case set(Value)

        /// Whether the change touches the field.
        public var changes: Bool {
            if case .keep = self { false } else { true }
        }

        /// What the field becomes when the change touches it: `nil` clears it.
        public var value: Value? {
            if case .set(let value) = self { value } else { nil }
        }
    }

    public var platform: Field<TokenAttributes.Platform> = .keep
    public var locale: Field<String> = .keep
    public var timeZone: Field<String> = .keep
    public var appVersion: Field<String> = .keep
    /// When the app last checked in, if the app server knows it better than now; `nil`: now.
    public var lastSeenAt: Date?

    public init() {}

    /// This change, then `later`: the later one's fields where it changes them, and its time.
    public func then(_ later: TokenAttributeChange) -> TokenAttributeChange {
        var merged = later
        if !later.platform.changes { merged.platform = platform }
        if !later.locale.changes { merged.locale = locale }
        if !later.timeZone.changes { merged.timeZone = timeZone }
        if !later.appVersion.changes { merged.appVersion = appVersion }
        if later.lastSeenAt == nil { merged.lastSeenAt = lastSeenAt }
        return merged
    }
}

// MARK: - Checking values

extension TokenAttributes {
    /// The longest locale, time zone and app version kept: longer values are refused, not cut.
    public static let maximumValueLength = 64

    /// `value` as a platform, or `.invalidTokenAttribute` naming `platform`.
    public static func platform(_ value: String) throws -> Platform {
        guard let platform = Platform(rawValue: value) else {
            throw RegistryError.invalidTokenAttribute(.platform)
        }
        return platform
    }

    /// A BCP 47 language tag by its syntax (RFC 5646 §2.1): a primary language of 2–3 letters (or
    /// 4–8, registered ones), then subtags of 1–8 letters or digits, separated by `-` (`_` is read
    /// as `-`, as Android writes `fr_CA`). Registries of subtags are not consulted: a tag the app
    /// reported is kept as it came, so that filtering by prefix (RFC 4647) finds it.
    public static func locale(_ value: String) throws -> String {
        let tag = value.replacingOccurrences(of: "_", with: "-")
        let subtags = tag.split(separator: "-", omittingEmptySubsequences: false)
        let isAlpha = { (s: Substring) in s.utf8.allSatisfy { ($0 | 0x20) >= 0x61 && ($0 | 0x20) <= 0x7A } }
        let isAlphanumeric = { (s: Substring) in
            s.utf8.allSatisfy { (($0 | 0x20) >= 0x61 && ($0 | 0x20) <= 0x7A) || ($0 >= 0x30 && $0 <= 0x39) }
        }
        guard tag.utf8.count <= maximumValueLength, let primary = subtags.first,
            (2...8).contains(primary.count), primary.count != 4, isAlpha(primary),
            subtags.dropFirst().allSatisfy({ (1...8).contains($0.count) && isAlphanumeric($0) })
        else {
            throw RegistryError.invalidTokenAttribute(.locale)
        }
        return tag
    }

    /// An IANA time zone name this server's time zone database knows (`Europe/Paris`, `UTC`).
    public static func timeZone(_ value: String) throws -> String {
        guard value.utf8.count <= maximumValueLength, value.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7F }),
            TimeZone(identifier: value) != nil
        else {
            throw RegistryError.invalidTokenAttribute(.timeZone)
        }
        return value
    }

    /// Dotted numbers: one to four parts, each 1–9 digits (`5`, `5.12`, `5.12.0`, `5.12.0.3`).
    public static func appVersion(_ value: String) throws -> String {
        let parts = value.split(separator: ".", omittingEmptySubsequences: false)
        guard (1...4).contains(parts.count),
            parts.allSatisfy({ (1...9).contains($0.utf8.count) && $0.utf8.allSatisfy { $0 >= 0x30 && $0 <= 0x39 } })
        else {
            throw RegistryError.invalidTokenAttribute(.appVersion)
        }
        return value
    }

    /// A time the app last checked in: not in the future (a minute of clock skew allowed).
    public static func lastSeenAt(_ date: Date, now: Date = Date()) throws -> Date {
        guard date <= now.addingTimeInterval(60) else {
            throw RegistryError.invalidTokenAttribute(.lastSeenInFuture)
        }
        return min(date, now)
    }
}

/// Which of a token's attributes was refused, and why: `RegistryError.invalidTokenAttribute`'s
/// reason, worded in `FCMWire`'s one table (`RefusalWording`).
public enum TokenAttributeProblem: Sendable, Hashable {
    case platform, locale, timeZone, appVersion
    case lastSeenInFuture, lastSeenCleared, lastSeenNotTime

    /// The request field at fault.
    public var field: String {
        switch self {
        case .platform: "platform"
        case .locale: "locale"
        case .timeZone: "timeZone"
        case .appVersion: "appVersion"
        case .lastSeenInFuture, .lastSeenCleared, .lastSeenNotTime: "lastSeenAt"
        }
    }
}
