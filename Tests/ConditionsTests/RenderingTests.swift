import Conditions
import Testing

@Suite("Caret rendering")
struct RenderingTests {
    private func rendered(_ source: String, dialect: Dialect = .v1) throws -> String {
        let error = try #require(throws: ConditionError.self) { try Condition(parsing: source, dialect: dialect) }
        return error.diagnostic.rendered(in: source)
    }

    @Test func caretUnderlinesTheOffendingText() throws {
        #expect(
            try rendered("'weather' topics") == """
                error: expected "in topics" after the topic name 'weather'; found 'topics'
                 --> condition:1:11
                1 | 'weather' topics
                  |           ^~~~~~

                """)
    }

    @Test func lineAndColumnOnLaterLines() throws {
        let source = "'a' in topics &&\n  ('b' in topics ||\n   'c$' in topics)"
        #expect(
            try rendered(source) == """
                error: '$' is not allowed in a topic name (allowed: letters, digits and - _ . ~ %)
                 --> condition:3:6
                3 |    'c$' in topics)
                  |      ^

                """)
    }

    @Test func columnsCountCharactersNotBytes() {
        let source = "'a' in topics && 'é"
        let diagnostic = Diagnostic(.error, .unexpectedCharacter, "x", at: SourceRange(offset: 18, length: 2))
        #expect(LineColumn(offset: 18, in: source).column == 19)
        #expect(diagnostic.rendered(in: source).contains("\n  | " + String(repeating: " ", count: 18) + "^\n"))
    }

    @Test("A huge line prints as a window around the caret")
    func longLinesAreClipped() throws {
        let source = String(repeating: "'a' in topics || ", count: 2000) + "'b' in topics &"
        let text = try rendered(source, dialect: .extended)
        #expect(text.contains("error: single '&': did you mean '&&'?"))
        #expect(text.count < 400)
        let lines = text.split(separator: "\n")
        let sourceLine = try #require(lines.first { $0.hasPrefix("1 | …") })
        let caretLine = try #require(lines.first { $0.contains("^") })
        let caretAt = caretLine.firstIndex(of: "^").map { caretLine.distance(from: caretLine.startIndex, to: $0) }
        let ampersandAt = sourceLine.lastIndex(of: "&").map { sourceLine.distance(from: sourceLine.startIndex, to: $0) }
        #expect(caretAt == ampersandAt)
    }

    @Test func warningsRenderTheirNotes() throws {
        let condition = try Condition(parsing: "'a' in topics || 'b' in topics && 'c' in topics")
        let warning = try #require(condition.warnings.first)
        let text = warning.rendered(in: condition.source)
        #expect(text.hasPrefix("warning: '&&' and '||' mixed without parentheses\n"))
        #expect(
            text.contains(
                "= note: read with '&&' before '||' (as fcm-registry evaluates it): 'a' in topics || ('b' in topics && 'c' in topics)"
            ))
        #expect(
            text.contains(
                "= note: read left to right (as FCM documents): ('a' in topics || 'b' in topics) && 'c' in topics"))
    }
}
