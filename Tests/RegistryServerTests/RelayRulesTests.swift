@testable import Delivery
@testable import FCMRelay
import FCMWire
import Foundation
import Registry
import Testing
import _CryptoExtras

/// The relay's rules without a network: what it sends for each protocol's message, what it does
/// with each answer, and how it keeps its access tokens.
@Suite struct RelayRulesTests {
    // MARK: - Legacy and XMPP to v1

    @Test func aLegacyMessageIsTranslatedFieldByFieldAsGoogleMapsIt() throws {
        var message = Message(target: .topic("news"))
        message.data = ["text": .string("hi"), "count": .number(3), "nested": .object(["a": .bool(true)])]
        message.notification = [
            "title": .string("T"), "body": .string("B"), "sound": .string("default"), "badge": .string("2"),
            "android_channel_id": .string("ch"), "body_loc_args": .string(#"["x", 1]"#), "click_action": .string("OPEN"),
        ]
        message.options.priority = .high
        message.options.timeToLive = 60
        message.options.collapseKey = "score"
        message.options.contentAvailable = true
        message.options.mutableContent = true
        message.options.restrictedPackageName = "com.example"
        let now = Date(timeIntervalSince1970: 1_800_000_000)
        let template = V1Outgoing.template(message, via: .legacy, now: now)
        #expect(
            try JSONDecoder().decode(JSON.self, from: Data(template.utf8)) == [
                "data": ["count": "3", "nested": #"{"a":true}"#, "text": "hi"],
                "notification": ["body": "B", "title": "T"],
                "android": [
                    "priority": "HIGH", "ttl": "60s", "collapse_key": "score", "restricted_package_name": "com.example",
                    "notification": [
                        "sound": "default", "channel_id": "ch", "body_loc_args": ["x", "1"], "click_action": "OPEN",
                    ],
                ],
                "apns": [
                    "headers": ["apns-priority": "10", "apns-expiration": "1800000060", "apns-collapse-id": "score"],
                    "payload": [
                        "aps": [
                            "alert": ["title": "T", "body": "B", "loc-args": ["x", "1"]], "sound": "default",
                            "badge": 2, "category": "OPEN", "content-available": 1, "mutable-content": 1,
                        ]
                    ],
                ],
            ])
    }

    @Test func aNormalPriorityMessageAsksAPNsForPriorityFive() {
        var message = Message(target: .token("t"))
        message.options.priority = .normal
        #expect(
            V1Outgoing.template(message, via: .xmpp, now: Date())
                == #"{"android":{"priority":"NORMAL"},"apns":{"headers":{"apns-priority":"5"}}}"#)
    }

    @Test func aV1MessageGoesOutAsSent() throws {
        var message = Message(target: .token("t"))
        message.data = ["k": .string("v")]
        message.platform["android"] = .object(["ttl": .string("30s"), "collapse_key": .string("c")])
        message.platform["fcm_options"] = .object(["analytics_label": .string("l")])
        message.options.timeToLive = 30
        #expect(
            V1Outgoing.template(message, via: .v1, now: Date())
                == #"{"android":{"collapse_key":"c","ttl":"30s"},"data":{"k":"v"},"fcm_options":{"analytics_label":"l"}}"#)
    }

    @Test func eachRecipientsBodyIsTheTemplateWithItsToken() {
        #expect(
            String(decoding: V1Outgoing.body(template: #"{"data":{"k":"v"}}"#, token: "abc:1"), as: UTF8.self)
                == #"{"message":{"token":"abc:1","data":{"k":"v"}}}"#)
        #expect(
            String(decoding: V1Outgoing.body(template: "{}", token: "a\"b"), as: UTF8.self)
                == #"{"message":{"token":"a\"b"}}"#)
    }

    // MARK: - FCM's answers

    @Test func eachAnswerHasItsRetryClass() {
        #expect(FCMAnswers.verdict(status: 200, code: nil, retryAfter: nil) == .delivered)
        #expect(FCMAnswers.verdict(status: 404, code: "UNREGISTERED", retryAfter: nil) == .gone("UNREGISTERED"))
        #expect(
            FCMAnswers.verdict(status: 403, code: "SENDER_ID_MISMATCH", retryAfter: nil)
                == .gone("SENDER_ID_MISMATCH"))
        #expect(
            FCMAnswers.verdict(status: 400, code: "INVALID_ARGUMENT", retryAfter: nil)
                == .failed("INVALID_ARGUMENT"))
        // A 404 or 403 without FCM's word for a dead token is the upstream's fault: retried, never pruned.
        #expect(FCMAnswers.verdict(status: 404, code: nil, retryAfter: nil) == .retryAfter("HTTP_404", seconds: nil))
        #expect(
            FCMAnswers.verdict(status: 404, code: "NOT_FOUND", retryAfter: nil) == .retryAfter("NOT_FOUND", seconds: nil))
        #expect(
            FCMAnswers.verdict(status: 403, code: "PERMISSION_DENIED", retryAfter: nil)
                == .retryAfter("PERMISSION_DENIED", seconds: nil))
        #expect(
            FCMAnswers.verdict(status: 401, code: "UNAUTHENTICATED", retryAfter: nil)
                == .credentialsRefused("UNAUTHENTICATED"))
        #expect(
            FCMAnswers.verdict(status: 401, code: "THIRD_PARTY_AUTH_ERROR", retryAfter: nil)
                == .failed("THIRD_PARTY_AUTH_ERROR"))
        #expect(
            FCMAnswers.verdict(status: 429, code: "QUOTA_EXCEEDED", retryAfter: nil)
                == .slowDown("QUOTA_EXCEEDED", seconds: 60))
        #expect(
            FCMAnswers.verdict(status: 429, code: "QUOTA_EXCEEDED", retryAfter: 7)
                == .slowDown("QUOTA_EXCEEDED", seconds: 7))
        #expect(
            FCMAnswers.verdict(status: 503, code: "UNAVAILABLE", retryAfter: 3) == .retryAfter("UNAVAILABLE", seconds: 3))
        #expect(FCMAnswers.verdict(status: 500, code: nil, retryAfter: nil) == .retryAfter("INTERNAL", seconds: nil))
        #expect(FCMAnswers.verdict(status: nil, code: nil, retryAfter: nil) == .retryAfter("UNAVAILABLE", seconds: nil))
    }

    @Test func backOffDoublesWithJitterAndHonoursRetryAfter() {
        for attempts in 1...12 {
            let base = min(RetryPolicy.maximumBackOff, pow(2, Double(attempts - 1)))
            let wait = RetryPolicy.backOff(afterAttempts: attempts, retryAfter: nil)
            #expect(wait >= base * 0.75 && wait <= base * 1.25)
        }
        #expect(RetryPolicy.backOff(afterAttempts: 1, retryAfter: 30) >= 30)
    }

    // MARK: - The worker's doorbell

    actor Flag {
        var isSet = false
        func set() { isSet = true }
    }

    @Test func theDoorbellHoldsOneRingAndOtherwiseWaitsForTheNext() async throws {
        let handoff = RelayHandoff()
        // Rings while nobody waits count once: the next wait returns without waiting its minute.
        handoff.wake()
        handoff.wake()
        await handoff.waitForWork(.seconds(60))
        // The one after waits for a ring, however long its timeout: it has not returned before
        // the ring, and returns after it.
        let returned = Flag()
        let waiter = Task {
            await handoff.waitForWork(.seconds(60))
            await returned.set()
        }
        try await Task.sleep(for: .milliseconds(300))
        #expect(await returned.isSet == false)
        handoff.wake()
        await waiter.value
        #expect(await returned.isSet)
    }

    // MARK: - Access tokens

    static let settings = FCMSettings(
        firebaseProjectID: "p", clientEmail: "e", privateKeyID: nil, privateKey: "", tokenURI: "https://t/token",
        upstream: "https://u")

    actor Issued {
        var count = 0
        func next() -> Int {
            count += 1
            return count
        }
    }

    @Test func anAccessTokenIsReusedThenRefreshedBeforeItExpires() async throws {
        let issued = Issued()
        let longLived = AccessTokenCache { _ in ("token-\(await issued.next())", .seconds(3600)) }
        let first = try await longLived.token(for: 1, settings: Self.settings)
        #expect(try await longLived.token(for: 1, settings: Self.settings) == first)
        // One that lives less than twice the refresh margin is refreshed after half its life.
        let shortLived = AccessTokenCache { _ in ("short-\(await issued.next())", .milliseconds(200)) }
        let a = try await shortLived.token(for: 1, settings: Self.settings)
        try await Task.sleep(for: .milliseconds(150))
        let b = try await shortLived.token(for: 1, settings: Self.settings)
        #expect(a != b)
        // Another key for the project is another token.
        var rotated = Self.settings
        rotated.clientEmail = "other"
        #expect(try await longLived.token(for: 1, settings: rotated) != first)
    }

    @Test func aRefusedTokenIsDroppedOnceAndManyCallersShareOneFetch() async throws {
        let issued = Issued()
        let cache = AccessTokenCache { _ in
            try await Task.sleep(for: .milliseconds(50))
            return ("token-\(await issued.next())", .seconds(3600))
        }
        let tokens = try await withThrowingTaskGroup(of: String.self) { group in
            for _ in 0..<20 { group.addTask { try await cache.token(for: 1, settings: Self.settings) } }
            return try await group.reduce(into: Set<String>()) { $0.insert($1) }
        }
        #expect(tokens == ["token-1"])
        await cache.drop(project: 1, token: "token-1")
        #expect(try await cache.token(for: 1, settings: Self.settings) == "token-2")
        // Dropping a token no longer cached changes nothing.
        await cache.drop(project: 1, token: "token-1")
        #expect(try await cache.token(for: 1, settings: Self.settings) == "token-2")
        #expect(await cache.fetches == 2)
    }

    // MARK: - Set-up

    @Test func aServiceAccountFileIsCheckedBeforeItIsKept() throws {
        #expect(throws: RelaySetupError.self) { try FCMSettings(serviceAccountJSON: Data("nope".utf8)) }
        #expect(throws: RelaySetupError.self) {
            try FCMSettings(serviceAccountJSON: Data(#"{"type":"authorized_user"}"#.utf8))
        }
        let badKey = #"{"project_id":"p","client_email":"e","private_key":"x","token_uri":"https://o/token"}"#
        #expect(throws: RelaySetupError.self) { try FCMSettings(serviceAccountJSON: Data(badKey.utf8)) }
    }

    /// The store keeps FCM's settings as the `fcm-v1` channel's, the key among the secrets, and
    /// gives them back whole; another channel's settings, or a field missing, are said, not guessed.
    @Test func fcmSettingsAreKeptAsTheChannelsAndReadBackWhole() throws {
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048).pkcs8PEMRepresentation
        let settings = FCMSettings(
            firebaseProjectID: "p", clientEmail: "sa@p.iam.gserviceaccount.com", privateKeyID: "kid1",
            privateKey: key, tokenURI: "https://oauth2.googleapis.com/token", upstream: FCMSettings.googleUpstream)
        let stored = settings.stored
        #expect(stored.channel == "fcm-v1")
        #expect(stored.secrets == ["privateKey": .string(key)])
        #expect(!stored.settingsJSON.contains("PRIVATE KEY"))
        #expect(try FCMSettings(stored) == settings)
        // Through the text a row keeps.
        let row = ChannelSettings(channel: stored.channel, settingsJSON: stored.settingsJSON, secretsJSON: stored.secretsJSON)
        #expect(try FCMSettings(row) == settings)
        var withoutKeyID = settings
        withoutKeyID.privateKeyID = nil
        #expect(try FCMSettings(withoutKeyID.stored) == withoutKeyID)

        var other = stored
        other.channel = "web-push"
        #expect(throws: ChannelSettingsUnreadable.self) { try FCMSettings(other) }
        var keyless = stored
        keyless.secrets = [:]
        #expect(throws: ChannelSettingsUnreadable.self) { try FCMSettings(keyless) }
        // A row whose text is not a JSON object reads as no fields, which FCM refuses, and which
        // fails nothing else.
        let handWritten = ChannelSettings(channel: "fcm-v1", settingsJSON: "[1]", secretsJSON: "{not json")
        #expect(handWritten.settings.isEmpty && handWritten.secrets.isEmpty)
        #expect(throws: ChannelSettingsUnreadable.self) { try FCMSettings(handWritten) }
        // Printed, the settings name the key but never show it.
        #expect(!"\(stored)".contains("PRIVATE KEY") && "\(stored)".contains("privateKey"))
        #expect(!"\(settings)".contains("PRIVATE KEY") && !String(reflecting: settings).contains("PRIVATE KEY"))
    }

    @Test func theAssertionIsTheJWTBearerGrantsShape() throws {
        let key = try _RSA.Signing.PrivateKey(keySize: .bits2048).pkcs8PEMRepresentation
        let settings = FCMSettings(
            firebaseProjectID: "p", clientEmail: "sa@p.iam.gserviceaccount.com", privateKeyID: "kid1",
            privateKey: key, tokenURI: "https://oauth2.googleapis.com/token", upstream: FCMSettings.googleUpstream)
        let parts = try settings.assertion(now: Date(timeIntervalSince1970: 1000)).split(separator: ".")
        #expect(parts.count == 3)
        let header = try JSONDecoder().decode(JSON.self, from: Data(try #require(Base64URL.decode(String(parts[0])))))
        let claims = try JSONDecoder().decode(JSON.self, from: Data(try #require(Base64URL.decode(String(parts[1])))))
        #expect(header == ["alg": "RS256", "typ": "JWT", "kid": "kid1"])
        #expect(
            claims == [
                "iss": "sa@p.iam.gserviceaccount.com", "aud": "https://oauth2.googleapis.com/token",
                "scope": "https://www.googleapis.com/auth/firebase.messaging", "iat": 1000, "exp": 4600,
            ])
    }
}
