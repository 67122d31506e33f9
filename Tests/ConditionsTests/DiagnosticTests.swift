import Conditions
import Testing

/// Every error the checker reports: its kind and exactly where it points.
@Suite("Condition errors")
struct DiagnosticTests {
    struct Case: CustomTestStringConvertible, Sendable {
        var source: String
        var dialect: Dialect = .v1
        var kind: Diagnostic.Kind
        /// Byte offset and length of the range the caret underlines.
        var offset: Int
        var length: Int
        /// A phrase the message must contain.
        var says: String
        var testDescription: String { "\(kind): \(source.prefix(60))" }
    }

    static let cases: [Case] = [
        Case(source: "", kind: .emptyCondition, offset: 0, length: 0, says: "empty"),
        Case(source: "   \n ", kind: .emptyCondition, offset: 5, length: 0, says: "empty"),
        Case(source: "'news in topics", kind: .unterminatedQuote, offset: 0, length: 1, says: "never closed"),
        Case(source: "'a' in topics && \"b in topics", kind: .unterminatedQuote, offset: 17, length: 1, says: "\""),
        Case(source: "'' in topics", kind: .emptyTopicName, offset: 0, length: 2, says: "empty topic name"),
        Case(source: "'a' in topics || \"\" in topics", kind: .emptyTopicName, offset: 17, length: 2, says: "empty"),
        Case(source: "'new$' in topics", kind: .invalidTopicCharacter, offset: 4, length: 1, says: "'$'"),
        Case(source: "'caf\u{E9}' in topics", kind: .invalidTopicCharacter, offset: 4, length: 2, says: "U+00E9"),
        Case(source: "'a b' in topics", kind: .invalidTopicCharacter, offset: 2, length: 1, says: "a space"),
        Case(
            source: "'" + String(repeating: "x", count: 901) + "' in topics", kind: .topicNameTooLong,
            offset: 1, length: 901, says: "900"),
        Case(source: "'weather' topics", kind: .expectedInTopics, offset: 10, length: 6, says: "in topics"),
        Case(source: "'weather' in topic", kind: .expectedInTopics, offset: 13, length: 5, says: "'topic'"),
        Case(source: "'weather'", kind: .expectedInTopics, offset: 9, length: 0, says: "end of the condition"),
        Case(source: "'weather' on topics", kind: .expectedInTopics, offset: 10, length: 2, says: "'on'"),
        Case(
            source: "('a' in topics && 'b' in topics", kind: .unclosedParenthesis, offset: 0, length: 1,
            says: "never closed"),
        Case(
            source: "(('a' in topics) && ('b' in topics", kind: .unclosedParenthesis, offset: 20, length: 1,
            says: "never closed"),
        Case(source: "'a' in topics)", kind: .unmatchedClosingParenthesis, offset: 13, length: 1, says: "no '('"),
        Case(source: ") 'a' in topics", kind: .unmatchedClosingParenthesis, offset: 0, length: 1, says: "no '('"),
        Case(source: "'a' in topics && ()", kind: .emptyParentheses, offset: 17, length: 2, says: "empty parentheses"),
        Case(source: "'a' in topics &&", kind: .missingOperand, offset: 14, length: 2, says: "no right operand"),
        Case(source: "|| 'a' in topics", kind: .missingOperand, offset: 0, length: 2, says: "no left operand"),
        Case(source: "'a' in topics && || 'b' in topics", kind: .missingOperand, offset: 14, length: 2, says: "'&&'"),
        Case(source: "('a' in topics ||)", kind: .missingOperand, offset: 15, length: 2, says: "'||'"),
        Case(source: "'a' in topics && !", kind: .missingOperand, offset: 17, length: 1, says: "nothing to negate"),
        Case(
            source: "'a' in topics 'b' in topics", kind: .missingOperator, offset: 14, length: 3, says: "'&&' or '||'"),
        Case(source: "'a' in topics ('b' in topics)", kind: .missingOperator, offset: 14, length: 1, says: "'('"),
        Case(source: "'a' in topics !('b' in topics)", kind: .missingOperator, offset: 14, length: 1, says: "'!'"),
        Case(source: "'a' in topics topics", kind: .trailingInput, offset: 14, length: 6, says: "'topics'"),
        Case(
            source: "'a' in topics & 'b' in topics", kind: .singleAmpersand, offset: 14, length: 1,
            says: "did you mean '&&'"),
        Case(
            source: "'a' in topics | 'b' in topics", kind: .singleBar, offset: 14, length: 1, says: "did you mean '||'"),
        Case(source: "'a' in topics and 'b' in topics", kind: .wordOperator, offset: 14, length: 3, says: "'&&'"),
        Case(source: "'a' in topics OR 'b' in topics", kind: .wordOperator, offset: 14, length: 2, says: "'||'"),
        Case(source: "not 'a' in topics", kind: .wordOperator, offset: 0, length: 3, says: "'!'"),
        Case(source: "'a' in topics && not('b' in topics)", kind: .wordOperator, offset: 17, length: 3, says: "'!'"),
        Case(source: "weather in topics", kind: .unquotedTopicName, offset: 0, length: 7, says: "'weather'"),
        Case(source: "'a' in topics = 'b'", kind: .unexpectedCharacter, offset: 14, length: 1, says: "'='"),
        Case(
            source:
                "'1' in topics || '2' in topics || '3' in topics || '4' in topics || '5' in topics || '6' in topics",
            kind: .tooManyTopics, offset: 85, length: 13, says: "at most 5 topics"),
        Case(
            source: "'a' in topics && 'b' in topics || 'c' in topics && 'd' in topics", dialect: .legacy,
            kind: .tooManyOperators, offset: 48, length: 2, says: "at most 2 operators"),
        Case(
            source: "!('a' in topics)", dialect: .legacy, kind: .negationNotAllowed, offset: 0, length: 1,
            says: "legacy"),
        Case(
            source: String(repeating: "(", count: 70) + "'a' in topics" + String(repeating: ")", count: 70),
            kind: .nestingTooDeep, offset: 64, length: 1, says: "64"),
        Case(
            source: String(repeating: "!", count: 65) + "('a' in topics)", kind: .nestingTooDeep, offset: 64, length: 1,
            says: "64"),
        Case(
            source: String(repeating: "x", count: 70_000), dialect: .extended, kind: .inputTooLong,
            offset: 65_536, length: 70_000 - 65_536, says: "65536"),
    ]

    @Test(arguments: cases)
    func reportsKindAndPosition(_ test: Case) throws {
        let error = try #require(throws: ConditionError.self) {
            try Condition(parsing: test.source, dialect: test.dialect)
        }
        let diagnostic = error.diagnostic
        #expect(diagnostic.severity == .error)
        #expect(diagnostic.kind == test.kind)
        #expect(diagnostic.range == SourceRange(offset: test.offset, length: test.length))
        #expect(diagnostic.message.contains(test.says), "message: \(diagnostic.message)")
    }

    @Test("Every error kind has a case in the table")
    func tableCoversEveryErrorKind() {
        let warnings: Set<Diagnostic.Kind> = [.mixedOperators, .duplicateTopic, .alwaysFalse, .alwaysTrue]
        let covered = Set(Self.cases.map(\.kind))
        for kind in Diagnostic.Kind.allCases where !warnings.contains(kind) {
            #expect(covered.contains(kind), "no test for \(kind)")
        }
    }

    @Test("The dialects' caps: at the cap is fine, one over is not")
    func capsAreInclusive() throws {
        let five = (1...5).map { "'t\($0)' in topics" }.joined(separator: " || ")
        #expect(try Condition(parsing: five, dialect: .v1).topicCount == 5)
        let six = five + " || 't6' in topics"
        #expect(throws: ConditionError.self) { try Condition(parsing: six, dialect: .v1) }
        #expect(try Condition(parsing: six, dialect: .extended).topicCount == 6)
        let twoOperators = "'a' in topics && ('b' in topics || 'c' in topics)"
        #expect(try Condition(parsing: twoOperators, dialect: .legacy).operatorCount == 2)
        #expect(try Condition(parsing: "!('a' in topics)", dialect: .extended).operatorCount == 1)
    }
}
