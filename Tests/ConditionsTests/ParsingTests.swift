import Conditions
import Testing

@Suite("Parsing and the canonical form")
struct ParsingTests {
    @Test(arguments: [
        ("'a' in topics", "'a' in topics"),
        ("\"a\" in topics", "'a' in topics"),
        ("  'a'\tin\n topics  ", "'a' in topics"),
        ("('a' in topics)", "'a' in topics"),
        ("'a' in topics&&'b' in topics", "'a' in topics && 'b' in topics"),
        ("'a' in topics && ('b' in topics && 'c' in topics)", "'a' in topics && 'b' in topics && 'c' in topics"),
        (
            "'a' in topics && ('b' in topics || !('c' in topics))",
            "'a' in topics && ('b' in topics || !('c' in topics))"
        ),
        ("!'a' in topics", "!('a' in topics)"),
        ("!!('a' in topics)", "!!('a' in topics)"),
        ("!('a' in topics && 'b' in topics)", "!('a' in topics && 'b' in topics)"),
        ("'a' in topics || 'b' in topics && 'c' in topics", "'a' in topics || ('b' in topics && 'c' in topics)"),
        ("'a' in topics && 'b' in topics || 'c' in topics", "('a' in topics && 'b' in topics) || 'c' in topics"),
        ("(('a' in topics || 'b' in topics)) && 'c' in topics", "('a' in topics || 'b' in topics) && 'c' in topics"),
        ("'TopicA' in topics && 'topica' in topics", "'TopicA' in topics && 'topica' in topics"),
        ("'a-b_c.d~e%f' in topics", "'a-b_c.d~e%f' in topics"),
    ])
    func canonicalForm(source: String, canonical: String) throws {
        let condition = try Condition(parsing: source, dialect: .extended)
        #expect(condition.canonical == canonical)
        let again = try Condition(parsing: canonical, dialect: .extended)
        #expect(again.canonical == canonical)
        #expect(again.expression.hasSameStructure(as: condition.expression))
    }

    @Test("! binds tighter than &&, which binds tighter than ||")
    func precedence() throws {
        let condition = try Condition(parsing: "!'a' in topics && 'b' in topics || 'c' in topics")
        guard case .or(let alternatives, _) = condition.expression, alternatives.count == 2,
            case .and(let both, _) = alternatives[0], case .not = both[0]
        else {
            Issue.record("unexpected tree for \(condition.canonical)")
            return
        }
    }

    @Test func nodesCarrySourceRanges() throws {
        let source = "'a' in topics && !('b' in topics)"
        let condition = try Condition(parsing: source)
        guard case .and(let operands, let range) = condition.expression else {
            Issue.record("expected &&")
            return
        }
        #expect(range == SourceRange(offset: 0, length: 33))
        #expect(operands[0].range == SourceRange(offset: 0, length: 13))
        #expect(operands[1].range == SourceRange(offset: 17, length: 16))
        guard case .not(let inner, _) = operands[1] else {
            Issue.record("expected !")
            return
        }
        #expect(inner.range == SourceRange(offset: 19, length: 13))
    }

    @Test func topicsAndCounts() throws {
        let condition = try Condition(parsing: "'b' in topics && ('a' in topics || !('b' in topics))")
        #expect(condition.topics == ["b", "a"])
        #expect(condition.topicCount == 3)
        #expect(condition.operatorCount == 3)
    }

    @Test("The topic-name rules")
    func topicNames() {
        #expect(TopicName.isValid("news-2026_v1.0~x%20"))
        #expect(!TopicName.isValid(""))
        #expect(!TopicName.isValid("a/b"))
        #expect(TopicName.isValid(String(repeating: "a", count: 900)))
        #expect(!TopicName.isValid(String(repeating: "a", count: 901)))
    }
}

@Suite("Warnings")
struct WarningTests {
    private func kinds(_ source: String) throws -> [Diagnostic.Kind] {
        try Condition(parsing: source, dialect: .extended).warnings.map(\.kind)
    }

    @Test func mixedOperatorsShowBothReadings() throws {
        let condition = try Condition(parsing: "'a' in topics || 'b' in topics && 'c' in topics")
        let warning = try #require(condition.warnings.first)
        #expect(warning.kind == .mixedOperators)
        #expect(warning.severity == .warning)
        #expect(warning.range == SourceRange(offset: 0, length: 47))
        #expect(warning.notes[0].hasSuffix("'a' in topics || ('b' in topics && 'c' in topics)"))
        #expect(warning.notes[1].hasSuffix("('a' in topics || 'b' in topics) && 'c' in topics"))
    }

    @Test func mixedOperatorsAreFoundInsideParentheses() throws {
        #expect(try kinds("!('a' in topics && 'b' in topics || 'c' in topics)") == [.mixedOperators])
        #expect(try kinds("('a' in topics && 'b' in topics) || 'c' in topics") == [])
    }

    @Test func duplicateTopicPointsAtTheRepeat() throws {
        let condition = try Condition(parsing: "'a' in topics || 'b' in topics || 'a' in topics")
        #expect(condition.warnings.map(\.kind) == [.duplicateTopic])
        #expect(condition.warnings[0].range == SourceRange(offset: 34, length: 13))
        #expect(condition.warnings[0].message.contains("first at 1:1"))
    }

    @Test(arguments: [
        ("'a' in topics && !('a' in topics)", Diagnostic.Kind.alwaysFalse),
        ("'a' in topics || !('a' in topics)", .alwaysTrue),
        ("('a' in topics || 'b' in topics) && !'a' in topics && !'b' in topics", .alwaysFalse),
    ])
    func constantConditions(source: String, kind: Diagnostic.Kind) throws {
        #expect(try kinds(source).contains(kind))
    }

    @Test func ordinaryConditionsHaveNoWarnings() throws {
        #expect(try kinds("'a' in topics && ('b' in topics || !('c' in topics))") == [])
        #expect(try kinds("!('a' in topics)") == [])
    }
}

@Suite("Evaluation")
struct EvaluationTests {
    static let documentedExampleTable: [([String], Bool)] = [
        ([], false),
        (["a"], false),
        (["a", "b"], true),
        (["a", "c"], true),
        (["b", "c"], false),
        (["a", "b", "c", "d"], true),
    ]

    @Test(arguments: documentedExampleTable)
    func documentedExample(topics: [String], reached: Bool) throws {
        // FCM's example: {A,B} and {A,C} receive; a device in only one topic receives nothing.
        let condition = try Condition(parsing: "'a' in topics && ('b' in topics || 'c' in topics)")
        #expect(condition.matches(subscribedTo: Set(topics)) == reached)
    }

    @Test("! reaches tokens with no topic at all")
    func negationReachesTokensWithoutTopics() throws {
        let condition = try Condition(parsing: "!('a' in topics)")
        #expect(condition.matches(subscribedTo: []))
        #expect(condition.matches(subscribedTo: ["b"]))
        #expect(!condition.matches(subscribedTo: ["a"]))
    }

    @Test("Topic names are case-sensitive")
    func caseSensitive() throws {
        let condition = try Condition(parsing: "'News' in topics")
        #expect(!condition.matches(subscribedTo: ["news"]))
        #expect(condition.matches(subscribedTo: ["News"]))
    }
}
