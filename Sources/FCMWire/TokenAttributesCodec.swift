import Foundation
import Registry

/// What the native token routes (`PUT /api/tokens/{token}`, `POST /api/tokens:batchUpdate`) read
/// of a token's attributes: each field left out is kept, `null` clears it, and a value that is not
/// one the field takes is refused naming the field, before anything is written.
public enum TokenAttributesCodec {
    /// The fields read; any other key of the object is not an attribute and is left to the route.
    public static let fields: Set<String> = ["platform", "locale", "timeZone", "appVersion", "lastSeenAt"]

    /// The change `object` asks for.
    /// - Throws: `RegistryError.invalidTokenAttribute` naming the first field at fault.
    public static func change(from object: [String: JSONValue], now: Date = Date()) throws -> TokenAttributeChange {
        var change = TokenAttributeChange()
        change.platform = try field(object["platform"], .platform, TokenAttributes.platform)
        change.locale = try field(object["locale"], .locale, TokenAttributes.locale)
        change.timeZone = try field(object["timeZone"], .timeZone, TokenAttributes.timeZone)
        change.appVersion = try field(object["appVersion"], .appVersion, TokenAttributes.appVersion)
        switch object["lastSeenAt"] {
        case nil: break
        case .null: throw RegistryError.invalidTokenAttribute(.lastSeenCleared)
        case .string(let text):
            guard text.utf8.count <= 64, let date = time(text) else {
                throw RegistryError.invalidTokenAttribute(.lastSeenNotTime)
            }
            change.lastSeenAt = try TokenAttributes.lastSeenAt(date, now: now)
        default: throw RegistryError.invalidTokenAttribute(.lastSeenNotTime)
        }
        return change
    }

    private static func field<Value>(
        _ json: JSONValue?, _ problem: TokenAttributeProblem, _ check: (String) throws -> Value
    ) throws -> TokenAttributeChange.Field<Value> {
        switch json {
        case nil: .keep
        case .null: .clear
        case .string(let text): .set(try check(text))
        default: throw RegistryError.invalidTokenAttribute(problem)
        }
    }

    /// RFC 3339, with or without fractional seconds, `Z` or an offset.
    private static func time(_ text: String) -> Date? {
        (try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)))
            ?? (try? Date(text, strategy: Date.ISO8601FormatStyle()))
    }
}
