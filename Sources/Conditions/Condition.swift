/// A topic condition that parsed under a dialect: its tree, its warnings, and what it names.
///
///     let condition = try Condition(parsing: "'a' in topics && !('b' in topics)", dialect: .v1)
///     condition.matches(subscribedTo: ["a"])   // true
public struct Condition: Sendable {
    /// The text as given.
    public let source: String
    public let dialect: Dialect
    public let expression: Expression
    /// Findings that leave the condition valid: mixed operators, a repeated topic, a constant result.
    ///
    /// At most `maximumWarnings`, in that order; `omittedWarnings` counts the rest. A repeated topic
    /// draws one warning however often it repeats, and a constant result is always kept.
    public let warnings: [Diagnostic]
    /// Warnings found beyond the first `maximumWarnings`, counted but not kept.
    public let omittedWarnings: Int
    /// `'name' in topics` atoms, counting repeats.
    public let topicCount: Int
    /// `&&`, `||` and `!` operators.
    public let operatorCount: Int

    /// The most warnings a condition carries, so that checking a long condition and reporting on it
    /// stay cheap and small however many findings it draws.
    public static let maximumWarnings = 20

    /// Parses and checks `source`.
    ///
    /// Parsing and every check are linear in the length of `source` (the truth table behind the
    /// constant-result warning is skipped where it would not be; see `Lint.truthTableBudget`).
    ///
    /// - Throws: `ConditionError` with the first error in the source, placed and explained.
    public init(parsing source: String, dialect: Dialect = .v1) throws(ConditionError) {
        if source.utf8.count > dialect.maximumLength {
            throw ConditionError(
                .inputTooLong,
                "the condition is \(source.utf8.count) bytes long; the limit is \(dialect.maximumLength)",
                at: SourceRange(offset: dialect.maximumLength, length: source.utf8.count - dialect.maximumLength))
        }
        var parser = try Parser(source, dialect: dialect)
        let expression = try parser.parseCondition()
        self.source = source
        self.dialect = dialect
        self.expression = expression
        self.topicCount = parser.topicCount
        self.operatorCount = parser.operatorCount
        var warnings = parser.warnings
        Lint.check(expression, in: source, into: &warnings)
        self.warnings = warnings.kept
        self.omittedWarnings = warnings.omitted
    }

    /// The canonical text (see `Expression.canonical`).
    public var canonical: String { expression.canonical }

    /// Distinct topic names in order of first appearance.
    public var topics: [String] { expression.topics }

    /// Whether a token subscribed to exactly `topics` is reached.
    public func matches(subscribedTo topics: Set<String>) -> Bool {
        expression.matches(subscribedTo: topics)
    }
}
