import Foundation
import HTTPTypes
import TestBackends
import Testing

/// `POST /api/webhooks` with a URL that is not RFC 3986: 400 naming the field, nothing stored.
@Suite("Webhook URLs refused over the API", .onEveryBackend)
struct WebhookURLRefusalTests {
    @Test(
        "CR/LF, a space, raw <>\" and NUL in a URL are 400, and no webhook is made",
        arguments: [
            #"https://93.184.215.14/h\r\nX-Injected: 1"#, #"https://93.184.215.14/a b"#,
            #"https://93.184.215.14/<x>"#, #"https://93.184.215.14/a\"b"#, #"https://93.184.215.14/h\u0000evil"#,
        ])
    func refused(url: String) async throws {
        let fixture = try await Fixture.make()
        try await fixture.test { client in
            let reply = try await client.call(
                .post, "/api/webhooks", body: #"{"url":"\#(url)","events":["delivery.failed"]}"#)
            #expect(reply.status == .badRequest)
            #expect(reply.json?["error"]?["code"] == "invalid_argument")
            #expect(reply.json?["error"]?["message"]?.string?.contains("RFC 3986") == true)
            #expect(try await client.call(.get, "/api/webhooks").json?["webhooks"] == [])
        }
    }
}
