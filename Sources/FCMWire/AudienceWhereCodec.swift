import AudienceEngine
import Foundation
import Registry

/// What `POST /api/audiences:resolve` reads of its `where`: which tokens of the audience count, by
/// what they say of their device and when they were last seen. Every key is optional; a key's
/// values are alternatives; keys combine with and. A value no token could say is refused naming
/// the key, before anything is resolved.
public enum AudienceWhereCodec {
    /// The most values one key may list: a filter is a handful of choices, not a token list.
    public static let maximumValues = 100
    /// The longest `seenWithin` taken: ten years.
    public static let maximumSeenWithinSeconds = 10 * 366 * 86_400

    /// The filter `json` asks for; `nil` for no `where` (or `null`).
    /// - Throws: `BadRequest` naming the key at fault.
    public static func filter(from json: JSONValue?, now: Date = Date()) throws -> AttributeFilter? {
        guard let json, !json.isNull else { return nil }
        guard let object = json.object else { throw BadRequest.whereNotObject }
        guard object.keys.allSatisfy(keys.contains) else { throw BadRequest.unknownWhereKey }
        var filter = AttributeFilter()
        filter.platforms = try values(object["platform"], "platform") { try TokenAttributes.platform($0).rawValue }
        filter.localeRanges = try values(object["locale"], "locale") { try TokenAttributes.locale($0).lowercased() }
        filter.timeZones = try values(object["timeZone"], "timeZone") { try TokenAttributes.timeZone($0) }
        filter.appVersion = try versionRange(object["appVersion"])
        filter.seenOnOrAfterDay = try seenSince(object["seenWithin"], now: now)
        return filter
    }

    static let keys: Set<String> = ["platform", "locale", "timeZone", "appVersion", "seenWithin"]

    /// A key's alternatives: an array of 1 to `maximumValues` strings, each checked as a token's
    /// attribute is, without repeats.
    private static func values(_ json: JSONValue?, _ key: String, _ check: (String) throws -> String) throws
        -> [String]?
    {
        guard let json, !json.isNull else { return nil }
        guard case .array(let array) = json, (1...maximumValues).contains(array.count) else {
            throw BadRequest.whereValues(key, maximum: maximumValues)
        }
        var checked: [String] = []
        for value in array {
            guard let text = value.string else { throw BadRequest.whereValues(key, maximum: maximumValues) }
            do {
                checked.append(try check(text))
            } catch RegistryError.invalidTokenAttribute(let problem) {
                throw BadRequest.whereValue(problem)
            }
        }
        var seen = Set<String>()
        return checked.filter { seen.insert($0).inserted }
    }

    /// `{"min": "5.0.0", "max": "5.99"}`: inclusive bounds, at least one, `min` not above `max`.
    private static func versionRange(_ json: JSONValue?) throws -> VersionRange? {
        guard let json, !json.isNull else { return nil }
        guard let object = json.object, !object.isEmpty, object.keys.allSatisfy({ $0 == "min" || $0 == "max" }) else {
            throw BadRequest.whereAppVersion
        }
        func bound(_ key: String) throws -> [Int]? {
            guard let value = object[key], !value.isNull else { return nil }
            guard let text = value.string, (try? TokenAttributes.appVersion(text)) != nil else {
                throw BadRequest.whereAppVersion
            }
            return text.split(separator: ".").map { Int($0)! }
        }
        let range = VersionRange(min: try bound("min"), max: try bound("max"))
        guard range.min != nil || range.max != nil else { throw BadRequest.whereAppVersion }
        if let low = range.min, let high = range.max, VersionRange.compare(low, high) > 0 {
            throw BadRequest.whereAppVersionEmpty
        }
        return range
    }

    /// `seenWithin` as a Google duration (`"2592000s"`), turned into the first UTC day it reaches
    /// back to: last-seen times are kept to the day, so a token seen on that day matches.
    private static func seenSince(_ json: JSONValue?, now: Date) throws -> Int32? {
        guard let json, !json.isNull else { return nil }
        guard let text = json.string, text.utf8.count <= 32, let seconds = GoogleDuration.seconds(text), seconds > 0,
            seconds <= Double(maximumSeenWithinSeconds)
        else {
            throw BadRequest.whereSeenWithin(maximumSeconds: maximumSeenWithinSeconds)
        }
        return SeenDay.of(secondsSince1970: now.timeIntervalSince1970 - seconds)
    }
}
