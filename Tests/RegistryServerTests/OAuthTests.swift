import Crypto
import _CryptoExtras
import Foundation
import Hummingbird
import HummingbirdTesting
import Registry
import TestBackends
import Testing

/// Google's token endpoint for service accounts, as google-auth calls it.
@Suite("OAuth 2.0 for service accounts", .onEveryBackend)
struct OAuthTests {
    static let scope = "https://www.googleapis.com/auth/firebase.messaging"

    /// A JWT as google-auth signs it (RS256, `kid` = `private_key_id`).
    static func assertion(
        _ file: ServiceAccountFile, claims: [String: Any] = [:], kid: String?? = .none, key: String? = nil
    ) throws -> String {
        let now = Date().timeIntervalSince1970.rounded(.down)
        var all: [String: Any] = [
            "iss": file.client_email, "scope": scope, "aud": "https://oauth2.googleapis.com/token", "iat": now,
            "exp": now + 3600,
        ]
        all.merge(claims) { $1 }
        var fields = ["alg": "RS256", "typ": "JWT"]
        // `.some(nil)`: no kid at all, as Node's google-auth-library signs.
        switch kid {
        case .none: fields["kid"] = file.private_key_id
        case .some(.some(let value)): fields["kid"] = value
        case .some(.none): break
        }
        let header = try JSONSerialization.data(withJSONObject: fields)
        let body = try JSONSerialization.data(withJSONObject: all)
        let input = Base64URL.encode(Array(header)) + "." + Base64URL.encode(Array(body))
        let signer = try _RSA.Signing.PrivateKey(pemRepresentation: key ?? file.private_key)
        let signature = try signer.signature(for: SHA256.hash(data: Array(input.utf8)), padding: .insecurePKCS1v1_5)
        return input + "." + Base64URL.encode(Array(signature.rawRepresentation))
    }

    static func exchange(_ client: Fixture.Client, _ assertion: String, grant: String? = nil) async throws -> Reply {
        let grantType = grant ?? "urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer"
        return try await client.client.execute(
            uri: "/token", method: .post, headers: [.contentType: "application/x-www-form-urlencoded"],
            body: ByteBuffer(string: "grant_type=\(grantType)&assertion=\(assertion)")
        ) { response in
            Reply(
                status: response.status, headers: response.headers,
                json: try? JSONDecoder().decode(JSON.self, from: Data(response.body.readableBytesView)))
        }
    }

    @Test("A signed assertion gets an access token that opens the project wherever a server key does")
    func exchangeAndUse() async throws {
        let fixture = try await Fixture.make()
        let (_, file) = try await fixture.registry.createServiceAccount(forProject: "test-app")
        #expect(file.type == "service_account")
        #expect(file.project_id == "test-app")
        #expect(file.universe_domain == "googleapis.com")
        #expect(file.private_key.hasPrefix("-----BEGIN PRIVATE KEY-----"))
        try await fixture.test { client in
            let reply = try await Self.exchange(client, try Self.assertion(file))
            #expect(reply.status == .ok)
            #expect(reply.json?["token_type"] == "Bearer")
            guard case .number(let seconds)? = reply.json?["expires_in"] else {
                Issue.record("no expires_in")
                return
            }
            #expect(seconds == 3599)
            let accessToken = try #require(reply.json?["access_token"]?.string)
            let bearer = "Bearer \(accessToken)"
            let groups = try await client.call(.get, "/api/groups", auth: .some(bearer))
            #expect(groups.status == .ok)
            let subscribed = try await client.call(
                .post, "/v1/projects/test-app/registrations/\(token(1))/topicSubscriptions?topic_name=news",
                body: "{}", auth: .some(bearer))
            #expect(subscribed.status == .ok)
            let sent = try await client.call(
                .post, "/v1/projects/test-app/messages:send", body: #"{"message":{"topic":"news"}}"#,
                auth: .some(bearer))
            #expect(sent.status == .ok)
            let locations = try await client.call(
                .get, "/v1/projects/-/serviceAccounts/\(file.client_email)/allowedLocations", auth: .some(bearer))
            #expect(locations.json == ["encodedLocations": "0x0", "locations": []])
            // Node's google-auth-library signs without a kid: the issuer finds the key.
            let withoutKid = try await Self.exchange(client, try Self.assertion(file, kid: .some(nil)))
            #expect(withoutKid.status == .ok)
            // Server keys keep working.
            #expect(try await client.call(.get, "/api/groups").status == .ok)
            // A forged or altered token opens nothing.
            // One character of the payload (the project and expiry) changed.
            var characters = Array(accessToken)
            let index = RegistryService.accessTokenPrefix.count + 3
            characters[index] = characters[index] == "A" ? "B" : "A"
            let altered = String(characters)
            #expect(try await client.call(.get, "/api/groups", auth: .some("Bearer \(altered)")).status == .unauthorized)
        }
    }

    @Test(
        "An assertion is taken once (its repeats within seconds get the same token), for Google's token URL or its own file's token_uri, never another"
    )
    func audienceAndReplay() async throws {
        let fixture = try await Fixture.make()
        let (_, file) = try await fixture.registry.createServiceAccount(
            forProject: "test-app", tokenURI: "http://127.0.0.1:8080/token")
        try await fixture.test { client in
            let own = try Self.assertion(file, claims: ["aud": "http://127.0.0.1:8080/token"])
            let first = try await Self.exchange(client, own)
            #expect(first.status == .ok)
            // Two refreshes of one client in one second sign the very same JWT.
            let repeated = try await Self.exchange(client, own)
            #expect(repeated.json?["access_token"] == first.json?["access_token"])
            let later = Date().addingTimeInterval(RegistryService.repeatedAssertionWindow + 1)
            await #expect(throws: OAuthError.invalidGrant("Invalid JWT: the assertion has been used before.")) {
                try await fixture.registry.exchange(assertion: own, now: later)
            }
            #expect(try await Self.exchange(client, try Self.assertion(file)).status == .ok)
            let elsewhere = try await Self.exchange(
                client, try Self.assertion(file, claims: ["aud": "https://attacker.example/token"]))
            #expect(elsewhere.json?["error"] == "invalid_grant")
        }
    }

    @Test("Refusals in the words of Google's token endpoint")
    func refusals() async throws {
        let fixture = try await Fixture.make()
        let (_, file) = try await fixture.registry.createServiceAccount(forProject: "test-app")
        let (_, other) = try await fixture.registry.createServiceAccount(forProject: "test-app")
        let now = Date().timeIntervalSince1970.rounded(.down)
        try await fixture.test { client in
            let cases: [(String, String, String?)] = [
                (try Self.assertion(file, key: other.private_key), "invalid_grant", nil),
                (try Self.assertion(file, kid: "0000"), "invalid_grant", nil),
                (try Self.assertion(file, claims: ["iat": now - 7200, "exp": now - 3600]), "invalid_grant", nil),
                (try Self.assertion(file, claims: ["exp": now + 7200]), "invalid_grant", nil),
                (try Self.assertion(file, claims: ["aud": "https://example.com/elsewhere"]), "invalid_grant", nil),
                (try Self.assertion(file, claims: ["iss": other.client_email]), "invalid_grant", nil),
                (try Self.assertion(file, claims: ["scope": "https://www.googleapis.com/auth/userinfo.email"]), "invalid_scope", nil),
                ("not.a.jwt", "invalid_grant", nil),
                (try Self.assertion(file), "unsupported_grant_type", "password"),
            ]
            for (assertion, error, grant) in cases {
                let reply = try await Self.exchange(client, assertion, grant: grant)
                #expect(reply.status == .badRequest)
                #expect(reply.json?["error"] == .string(error))
                #expect(reply.json?["error_description"]?.string?.isEmpty == false)
            }
            // A revoked account's assertions are refused.
            try await fixture.registry.revokeServiceAccount(keyID: file.private_key_id)
            let revoked = try await Self.exchange(client, try Self.assertion(file))
            #expect(revoked.json?["error"] == "invalid_grant")
            let stillGood = try await Self.exchange(client, try Self.assertion(other))
            #expect(stillGood.status == .ok)
        }
    }
}
