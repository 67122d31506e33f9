import Testing

@testable import Registry

/// A webhook URL is a URI in RFC 3986's characters, or refused before anything is stored: a
/// lenient parser let CR/LF, spaces, raw `<>"` and NUL through, and a NUL cut the stored URL short.
@Suite("Webhook URL syntax")
struct WebhookURLSyntaxTests {
    @Test(
        "A byte RFC 3986 does not allow, or a broken percent-encoding, is refused with its place",
        arguments: [
            ("https://example.com/a\r\nX-Injected: 1", "a carriage return (CR) at byte 22"),
            ("https://example.com/a\nb", "a line feed (LF) at byte 22"),
            ("https://example.com/a b", "a space at byte 22"),
            ("https://example.com/\u{0}evil", "a NUL byte at byte 21"),
            ("https://example.com/<script>", "'<' at byte 21"),
            ("https://example.com/a\"b", "'\"' at byte 22"),
            ("https://example.com/{x}", "'{' at byte 21"),
            ("https://example.com/a|b", "'|' at byte 22"),
            ("https://example.com/a\\b", "'\\' at byte 22"),
            ("https://example.com/a^b", "'^' at byte 22"),
            ("https://example.com/a`b", "'`' at byte 22"),
            ("https://example.com/\u{7F}", "the control character 0x7F at byte 21"),
            ("https://exämple.com/", "a byte that is not ASCII (0xC3) at byte 11"),
            ("https://example.com/%zz", "a % at byte 21 that is not followed by two hex digits"),
            ("https://example.com/%4", "a % at byte 21 that is not followed by two hex digits"),
        ])
    func refused(url: String, words: String) {
        let policy = WebhookURLPolicy(allowPrivateNetworks: true)
        #expect {
            _ = try policy.target(of: url)
        } throws: { error in
            guard case RegistryError.invalidWebhookURL(let message) = error else { return false }
            return message.contains(words) && !message.contains("\u{0}") && !message.contains("\r")
        }
    }

    @Test(
        "Every character RFC 3986 allows, and percent-encodings, are accepted",
        arguments: [
            "https://example.com/hooks?x=1&y=%20z",
            "https://example.com:8443/a-b._~!$&'()*+,;=:@/c?d=/?",
            "https://[2606:2800:220:1::1]/h",
            "https://EXAMPLE.com/%E2%9C%93",
        ])
    func accepted(url: String) throws {
        #expect(WebhookURLPolicy.firstFault(in: url) == nil)
        _ = try WebhookURLPolicy().target(of: url)
    }
}
