import Foundation
import Registry
import Testing

@Suite("Token attributes: the values each field takes")
struct TokenAttributesTests {
    @Test(
        "Locales are BCP 47 tags by their syntax; Android's underscore reads as a hyphen",
        arguments: [
            ("fr", "fr"), ("fr-CA", "fr-CA"), ("zh-Hant-TW", "zh-Hant-TW"), ("fr_CA", "fr-CA"), ("es-419", "es-419"),
            ("gsw", "gsw"),
        ])
    func locales(input: String, kept: String) throws {
        #expect(try TokenAttributes.locale(input) == kept)
    }

    @Test("Not locales", arguments: ["", "f", "fran", "fr-", "-fr", "fr--CA", "fr-CA-123456789", "1a", "fr CA", "é"])
    func notLocales(input: String) {
        #expect(throws: RegistryError.invalidTokenAttribute(.locale)) { try TokenAttributes.locale(input) }
    }

    @Test("Time zones are IANA names the server knows")
    func timeZones() throws {
        #expect(try TokenAttributes.timeZone("Europe/Paris") == "Europe/Paris")
        #expect(try TokenAttributes.timeZone("America/Argentina/Buenos_Aires") == "America/Argentina/Buenos_Aires")
        for bad in ["", "Europe/Nowhere", "Europe/Paris ", "+02:00x", String(repeating: "A", count: 65)] {
            #expect(throws: RegistryError.invalidTokenAttribute(.timeZone)) { try TokenAttributes.timeZone(bad) }
        }
    }

    @Test("App versions are one to four dotted numbers")
    func appVersions() throws {
        for good in ["5", "5.12", "5.12.0", "5.12.0.3", "123456789.0"] {
            #expect(try TokenAttributes.appVersion(good) == good)
        }
        for bad in ["", "5.", ".5", "5..1", "5.12.0-beta", "v5", "1.2.3.4.5", "1234567890"] {
            #expect(throws: RegistryError.invalidTokenAttribute(.appVersion)) { try TokenAttributes.appVersion(bad) }
        }
    }

    @Test("lastSeenAt may not be in the future beyond a minute of clock skew")
    func lastSeen() throws {
        let now = Date()
        #expect(
            try TokenAttributes.lastSeenAt(now.addingTimeInterval(-3600), now: now) == now.addingTimeInterval(-3600))
        #expect(try TokenAttributes.lastSeenAt(now.addingTimeInterval(30), now: now) == now)
        #expect(throws: RegistryError.invalidTokenAttribute(.lastSeenInFuture)) {
            try TokenAttributes.lastSeenAt(now.addingTimeInterval(120), now: now)
        }
    }

    @Test("A change applied after another keeps the earlier's fields the later one leaves alone")
    func changesCompose() {
        var first = TokenAttributeChange()
        first.platform = .set(.ios)
        first.locale = .set("fr")
        var second = TokenAttributeChange()
        second.locale = .clear
        second.appVersion = .set("2.0")
        let both = first.then(second)
        #expect(both.platform == .set(.ios))
        #expect(both.locale == .clear)
        #expect(both.timeZone == .keep)
        #expect(both.appVersion == .set("2.0"))
    }

    @Test("Fresh means seen within the policy's staleAfter: FCM's guidance is 30 days")
    func freshness() {
        let now = Date()
        #expect(TokenPolicy.standard.isFresh(lastSeenAt: now.addingTimeInterval(-29 * 86_400), now: now))
        #expect(!TokenPolicy.standard.isFresh(lastSeenAt: now.addingTimeInterval(-31 * 86_400), now: now))
    }
}
