/// A recursive-descent parser over `Lexer` tokens, built from `peek` / `take` / `expect`.
///
/// Grammar (docs/condition-language.md):
///
///     condition  = expression END
///     expression = unary { ( "&&" | "||" ) unary }
///     unary      = "!" unary | primary
///     primary    = "(" expression ")" | TOPIC "in" "topics"
///
/// A run of operands at one level of parentheses is collected first and only then shaped into a
/// tree, so that both readings of an unparenthesized `&&`/`||` mix are at hand for the warning.
struct Parser {
    private var lexer: Lexer
    private var current: Token
    private let dialect: Dialect
    private let source: String

    /// `'name' in topics` atoms seen so far, for the dialect's topic cap.
    private(set) var topicCount = 0
    /// `&&`, `||` and `!` seen so far.
    private(set) var operatorCount = 0
    private var binaryOperatorCount = 0
    /// Warnings found while parsing (operators mixed without parentheses), capped.
    private(set) var warnings = WarningList(capacity: Condition.maximumWarnings)

    /// The longest excerpt of a reading shown in a mixed-operator note; a level of a huge condition
    /// would otherwise be printed twice in full, once per warning around it.
    static let maximumReadingLength = 240

    init(_ source: String, dialect: Dialect) throws(ConditionError) {
        self.source = source
        self.dialect = dialect
        lexer = Lexer(source)
        current = try lexer.next()
    }

    /// Parses the whole input as one condition.
    mutating func parseCondition() throws(ConditionError) -> Expression {
        if case .end = current.kind {
            throw ConditionError(.emptyCondition, "the condition is empty", at: current.range)
        }
        let expression = try parseExpression(depth: 0)
        switch current.kind {
        case .end:
            return expression
        case .rightParenthesis:
            throw ConditionError(
                .unmatchedClosingParenthesis, "unbalanced parenthesis: this ')' has no '(' to close",
                at: current.range)
        default:
            throw ConditionError(
                .trailingInput, "unexpected \(current.description) after the end of the condition",
                at: current.range)
        }
    }

    // MARK: - Token stream

    private mutating func take() throws(ConditionError) -> Token {
        let token = current
        previousRange = token.range
        current = try lexer.next()
        return token
    }

    /// The range of the last token taken: where a node that ends with it ends.
    private var previousRange = SourceRange(offset: 0, length: 0)

    private var isAtOperandEnd: Bool {
        switch current.kind {
        case .end, .rightParenthesis, .and, .or: true
        default: false
        }
    }

    // MARK: - Grammar

    private mutating func parseExpression(depth: Int) throws(ConditionError) -> Expression {
        var operands = [try parseUnary(depth: depth, after: nil)]
        var operators: [Token] = []
        while true {
            switch current.kind {
            case .and, .or:
                let op = try take()
                try countBinaryOperator(op)
                operators.append(op)
                operands.append(try parseUnary(depth: depth, after: op))
            case .topic, .leftParenthesis, .not:
                throw ConditionError(
                    .missingOperator, "expected '&&' or '||' before \(current.description)", at: current.range)
            case .word(let word):
                if let replacement = Self.wordOperators[word.lowercased()], replacement != "!" {
                    throw ConditionError(
                        .wordOperator, "use '\(replacement)' instead of '\(word)'", at: current.range)
                }
                if word.lowercased() == "not" {
                    throw ConditionError(.missingOperator, "expected '&&' or '||' before 'not'", at: current.range)
                }
                throw ConditionError(
                    .trailingInput,
                    "unexpected \(current.description) after a complete condition; expected '&&' or '||'",
                    at: current.range)
            case .end, .rightParenthesis:
                return shape(operands, operators)
            }
        }
    }

    private mutating func parseUnary(depth: Int, after op: Token?) throws(ConditionError) -> Expression {
        if isAtOperandEnd { try throwMissingOperand(after: op) }
        guard case .not = current.kind else { return try parsePrimary(depth: depth) }
        let bang = try take()
        guard dialect.allowsNegation else {
            throw ConditionError(
                .negationNotAllowed, "the legacy protocol has no '!'; only '&&' and '||' (use dialect v1 for '!')",
                at: bang.range)
        }
        try checkDepth(depth + 1, at: bang)
        operatorCount += 1
        let operand = try parseUnary(depth: depth + 1, after: bang)
        return .not(operand, bang.range.union(previousRange))
    }

    private mutating func parsePrimary(depth: Int) throws(ConditionError) -> Expression {
        switch current.kind {
        case .leftParenthesis:
            let open = try take()
            try checkDepth(depth + 1, at: open)
            if case .rightParenthesis = current.kind {
                throw ConditionError(.emptyParentheses, "empty parentheses", at: open.range.union(current.range))
            }
            let inner = try parseExpression(depth: depth + 1)
            guard case .rightParenthesis = current.kind else {
                throw ConditionError(
                    .unclosedParenthesis, "unbalanced parenthesis: this '(' is never closed", at: open.range)
            }
            _ = try take()
            return inner
        case .topic(let name):
            let topic = try take()
            try expectInTopics(after: topic, name: name)
            topicCount += 1
            let atom = Expression.topic(name, topic.range.union(previousRange))
            if let cap = dialect.maximumTopics, topicCount > cap {
                throw ConditionError(
                    .tooManyTopics,
                    "a \(dialect.rawValue) condition names at most \(cap) topics; this is topic \(topicCount)",
                    at: atom.range)
            }
            return atom
        case .word(let word):
            if let replacement = Self.wordOperators[word.lowercased()] {
                throw ConditionError(.wordOperator, "use '\(replacement)' instead of '\(word)'", at: current.range)
            }
            throw ConditionError(
                .unquotedTopicName, "topic names are quoted: write '\(word)' in topics", at: current.range)
        case .and, .or, .not, .rightParenthesis, .end:
            // parseUnary handles these before calling here.
            throw ConditionError(.missingOperand, "expected a condition", at: current.range)
        }
    }

    private mutating func expectInTopics(after topic: Token, name: String) throws(ConditionError) {
        guard case .word("in") = current.kind else {
            throw ConditionError(
                .expectedInTopics,
                "expected \"in topics\" after the topic name '\(name)'; found \(current.description)",
                at: current.range)
        }
        _ = try take()
        guard case .word("topics") = current.kind else {
            throw ConditionError(
                .expectedInTopics,
                "expected \"in topics\" after the topic name '\(name)'; found \"in\" then \(current.description)",
                at: current.range)
        }
        _ = try take()
    }

    // MARK: - Checks

    private static let wordOperators = ["and": "&&", "or": "||", "not": "!"]

    private func throwMissingOperand(after op: Token?) throws(ConditionError) -> Never {
        if let op {
            let what = op.kind == .not ? "'!' has nothing to negate" : "\(op.description) has no right operand"
            throw ConditionError(.missingOperand, what, at: op.range)
        }
        switch current.kind {
        case .and, .or:
            throw ConditionError(.missingOperand, "\(current.description) has no left operand", at: current.range)
        case .rightParenthesis:
            throw ConditionError(
                .unmatchedClosingParenthesis, "unbalanced parenthesis: this ')' has no '(' to close", at: current.range)
        default:
            throw ConditionError(.missingOperand, "expected a condition", at: current.range)
        }
    }

    private mutating func countBinaryOperator(_ op: Token) throws(ConditionError) {
        operatorCount += 1
        binaryOperatorCount += 1
        if let cap = dialect.maximumOperators, binaryOperatorCount > cap {
            throw ConditionError(
                .tooManyOperators,
                "a \(dialect.rawValue) condition uses at most \(cap) operators; this is operator \(binaryOperatorCount)",
                at: op.range)
        }
    }

    private func checkDepth(_ depth: Int, at token: Token) throws(ConditionError) {
        if depth > dialect.maximumDepth {
            throw ConditionError(
                .nestingTooDeep, "parentheses and '!' nest more than \(dialect.maximumDepth) deep", at: token.range)
        }
    }

    // MARK: - Shaping a level

    /// Builds the tree for one level: `&&` binds tighter than `||`. Where both appear, also builds
    /// the strict left-to-right reading and warns with both (excerpts of them, if they are long).
    private mutating func shape(_ operands: [Expression], _ operators: [Token]) -> Expression {
        guard !operators.isEmpty else { return operands[0] }
        var groups: [[Expression]] = [[operands[0]]]
        for (op, operand) in zip(operators, operands.dropFirst()) {
            if op.kind == .or { groups.append([]) }
            groups[groups.count - 1].append(operand)
        }
        let byPrecedence = Self.combine(groups.map { Self.combine($0, or: false) }, or: true)
        let hasAnd = operators.contains { $0.kind == .and }
        let hasOr = operators.contains { $0.kind == .or }
        if hasAnd && hasOr {
            warnings.append {
                let leftToRight = Self.leftToRight(operands, operators)
                let agree = leftToRight.hasSameStructure(as: byPrecedence)
                let length = Self.maximumReadingLength
                return Diagnostic(
                    .warning, .mixedOperators,
                    "'&&' and '||' mixed without parentheses" + (agree ? " (both readings agree here)" : ""),
                    at: byPrecedence.range,
                    notes: [
                        "read with '&&' before '||' (as fcm-registry evaluates it): "
                            + byPrecedence.canonical(maximumLength: length),
                        "read left to right (as FCM documents): " + leftToRight.canonical(maximumLength: length),
                        "add parentheses to say which one you mean",
                    ])
            }
        }
        return byPrecedence
    }

    /// The strict left-to-right reading of one level: each run of one operator is joined at once, so
    /// that a long run is not copied again for every operand added to it.
    private static func leftToRight(_ operands: [Expression], _ operators: [Token]) -> Expression {
        var run = [operands[0]]
        var runIsOr = operators[0].kind == .or
        for (op, operand) in zip(operators, operands.dropFirst()) {
            let isOr = op.kind == .or
            if isOr != runIsOr {
                run = [combine(run, or: runIsOr)]
                runIsOr = isOr
            }
            run.append(operand)
        }
        return combine(run, or: runIsOr)
    }

    /// Joins operands with one operator, flattening operands that already use it.
    private static func combine(_ operands: [Expression], or: Bool) -> Expression {
        guard operands.count > 1 else { return operands[0] }
        var flat: [Expression] = []
        for operand in operands {
            switch (operand, or) {
            case (.and(let inner, _), false), (.or(let inner, _), true): flat.append(contentsOf: inner)
            default: flat.append(operand)
            }
        }
        let range = operands[0].range.union(operands[operands.count - 1].range)
        return or ? .or(flat, range) : .and(flat, range)
    }
}
