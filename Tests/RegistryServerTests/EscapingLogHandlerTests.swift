import Logging
@testable import RegistryApp
@testable import RegistryServer
import Testing

@Suite("Log escaping")
struct EscapingLogHandlerTests {
    @Test(
        "A value cannot start a line, pass for another field, or run long",
        arguments: [
            ("123456789012", "123456789012"),
            ("a\nforged line", #""a\nforged line""#),
            ("x project.id=other", #""x project.id=other""#),
            (#"say "hi""#, #""say \"hi\"""#),
            ("back\\slash\r\u{1B}[31m", #"back\\slash\r\u{1b}[31m"#),
            ("", #""""#),
        ])
    func values(raw: String, logged: String) {
        #expect(EscapingLogHandler.escaped(raw) == logged)
    }

    @Test("A long value keeps its first 256 bytes and says how many it left out")
    func bounded() {
        let logged = EscapingLogHandler.escaped(String(repeating: "k", count: 10_000))
        #expect(logged == "\"" + String(repeating: "k", count: 256) + "…(+9744 bytes)\"")
    }
}

@Suite("Log escaping, Unicode")
struct EscapingUnicodeTests {
    /// A space or a quote followed by a combining mark is one `Character`: compared character by
    /// character, neither would be found, yet the line gets the raw byte.
    @Test(
        "Spaces, quotes and separators are found scalar by scalar; format and separator characters are escaped",
        arguments: [
            ("a b\"\u{301} peer=evil", "\"a b\\\"\u{301} peer=evil\""),
            (" \u{301}x", "\" \u{301}x\""),
            ("x\u{202E}y", #"x\u{202e}y"#),
            ("no\u{A0}break", #"no\u{a0}break"#),
            ("caf\u{E9}", "caf\u{E9}"),
        ])
    func scalars(raw: String, logged: String) {
        #expect(EscapingLogHandler.escaped(raw) == logged)
    }
}
