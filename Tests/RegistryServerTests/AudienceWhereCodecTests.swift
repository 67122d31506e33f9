import AudienceEngine
import FCMWire
import Foundation
import Registry
import Testing

@Suite("What a where says: AudienceWhereCodec")
struct AudienceWhereCodecTests {
    static func filter(_ json: String, now: Date = Date()) throws -> AttributeFilter? {
        try AudienceWhereCodec.filter(from: try JSONDecoder().decode(JSONValue.self, from: Data(json.utf8)), now: now)
    }

    @Test("every key read: platforms, locale ranges lowercased with _ as -, zones, version bounds, seenWithin as a day")
    func readsEveryKey() throws {
        // 2025-11-28T12:00:00Z is day 20,420; thirty days before it, day 20,390.
        let now = Date(timeIntervalSince1970: 20_420 * 86_400 + 43_200)
        let filter = try #require(
            try Self.filter(
                #"{"platform":["ios","web","ios"],"locale":["fr_CA","EN"],"timeZone":["Europe/Paris"],"appVersion":{"min":"5.0.0","max":"5.99"},"seenWithin":"2592000s"}"#,
                now: now))
        #expect(filter.platforms == ["ios", "web"])
        #expect(filter.localeRanges == ["fr-ca", "en"])
        #expect(filter.timeZones == ["Europe/Paris"])
        #expect(filter.appVersion == VersionRange(min: [5, 0, 0], max: [5, 99]))
        #expect(filter.seenOnOrAfterDay == 20_390)
        #expect(!filter.isEmpty)
        #expect(try Self.filter("null") == nil)
        #expect(try Self.filter("{}")?.isEmpty == true)
    }

    @Test("versions compare number by number, a missing number counting as 0")
    func versions() {
        let range = VersionRange(min: [5], max: [5, 99])
        #expect(range.contains([5, 0, 0]))
        #expect(range.contains([5, 12]))
        #expect(range.contains([5, 99, 0]))
        #expect(!range.contains([5, 99, 1]))
        #expect(!range.contains([4, 99]))
        #expect(VersionRange(min: [5, 1]).contains([5, 1, 0]))
        #expect(VersionRange.compare([5, 12], [5, 9]) > 0)
    }

    @Test(
        "a where no token could match is refused naming its key",
        arguments: [
            (#"[]"#, "where"), (#"{"os":["ios"]}"#, "where"), (#"{"platform":"ios"}"#, "where.platform"),
            (#"{"platform":[]}"#, "where.platform"), (#"{"platform":["windows"]}"#, "where.platform"),
            (#"{"locale":["f"]}"#, "where.locale"), (#"{"locale":[3]}"#, "where.locale"),
            (#"{"timeZone":["Mars/Olympus"]}"#, "where.timeZone"), (#"{"appVersion":"5"}"#, "where.appVersion"),
            (#"{"appVersion":{}}"#, "where.appVersion"), (#"{"appVersion":{"min":"5.x"}}"#, "where.appVersion"),
            (#"{"appVersion":{"min":"6","max":"5.9"}}"#, "where.appVersion"),
            (#"{"appVersion":{"least":"6"}}"#, "where.appVersion"), (#"{"seenWithin":"30d"}"#, "where.seenWithin"),
            (#"{"seenWithin":"0s"}"#, "where.seenWithin"), (#"{"seenWithin":2592000}"#, "where.seenWithin"),
            (#"{"seenWithin":"999999999999s"}"#, "where.seenWithin"),
        ])
    func refused(json: String, field: String) throws {
        do {
            _ = try Self.filter(json)
            Issue.record("\(json) was taken")
        } catch let refused as BadRequest {
            #expect(refused.field == field)
            #expect(refused.message.hasPrefix(field))
        }
    }

    @Test("a key lists at most 100 values")
    func boundedValues() throws {
        let many = (0..<101).map { _ in #""ios""# }.joined(separator: ",")
        #expect(throws: BadRequest.self) { try Self.filter(#"{"platform":[\#(many)]}"#) }
    }
}
