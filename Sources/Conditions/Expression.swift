/// A parsed condition as a tree, with a source range on every node.
///
/// `&&` and `||` are n-ary: `a && (b && c)` and `a && b && c` are the same tree, so the tree's
/// depth is bounded by the nesting of parentheses and `!`, which the parser limits.
public indirect enum Expression: Sendable {
    /// `'name' in topics`.
    case topic(String, SourceRange)
    /// `!operand`.
    case not(Expression, SourceRange)
    /// Every operand matches; at least two operands.
    case and([Expression], SourceRange)
    /// Some operand matches; at least two operands.
    case or([Expression], SourceRange)

    /// Where the node stands in the source (without enclosing parentheses).
    public var range: SourceRange {
        switch self {
        case .topic(_, let range), .not(_, let range), .and(_, let range), .or(_, let range): range
        }
    }

    /// Whether a token for which `isSubscribed(topic)` holds is reached by this condition.
    ///
    /// `!` is plain negation, so `!('a' in topics)` also reaches a token subscribed to no topic.
    public func matches(_ isSubscribed: (String) -> Bool) -> Bool {
        switch self {
        case .topic(let name, _): isSubscribed(name)
        case .not(let operand, _): !operand.matches(isSubscribed)
        case .and(let operands, _): operands.allSatisfy { $0.matches(isSubscribed) }
        case .or(let operands, _): operands.contains { $0.matches(isSubscribed) }
        }
    }

    /// Whether a token subscribed to exactly `topics` is reached by this condition.
    public func matches(subscribedTo topics: Set<String>) -> Bool {
        matches { topics.contains($0) }
    }

    /// Equality of the trees, ignoring where their nodes stand in the source.
    public func hasSameStructure(as other: Expression) -> Bool {
        switch (self, other) {
        case (.topic(let a, _), .topic(let b, _)): a == b
        case (.not(let a, _), .not(let b, _)): a.hasSameStructure(as: b)
        case (.and(let a, _), .and(let b, _)), (.or(let a, _), .or(let b, _)):
            a.count == b.count && zip(a, b).allSatisfy { $0.hasSameStructure(as: $1) }
        default: false
        }
    }

    /// The topic names in the order they first appear, each once.
    public var topics: [String] {
        var seen = Set<String>()
        var ordered: [String] = []
        forEachTopic { name, _ in
            if seen.insert(name).inserted { ordered.append(name) }
        }
        return ordered
    }

    /// Atoms and operators in the tree: what one evaluation visits at most.
    var nodeCount: Int {
        switch self {
        case .topic: 1
        case .not(let operand, _): 1 + operand.nodeCount
        case .and(let operands, _), .or(let operands, _): operands.reduce(1) { $0 + $1.nodeCount }
        }
    }

    /// Visits every `'name' in topics` atom in source order.
    public func forEachTopic(_ body: (String, SourceRange) -> Void) {
        switch self {
        case .topic(let name, let range): body(name, range)
        case .not(let operand, _): operand.forEachTopic(body)
        case .and(let operands, _), .or(let operands, _): operands.forEach { $0.forEachTopic(body) }
        }
    }
}

// MARK: - Canonical form

extension Expression {
    /// The canonical text: single quotes, single spaces around `&&` and `||`, `!(…)` as FCM writes it,
    /// and parentheses only where they are needed.
    ///
    /// An `&&` group inside `||` is always parenthesized: FCM documents left-to-right evaluation,
    /// so without parentheses `a || b && c` could be read two ways. The canonical form has one reading
    /// under both rules and never draws the mixed-operator warning.
    public var canonical: String {
        var text = ""
        write(to: &text, limit: .max)
        return text
    }

    /// The canonical text cut after about `maximumLength` bytes, ending in `…` where it was cut.
    ///
    /// Writing stops once the limit is passed, so a short excerpt of a huge condition costs little.
    func canonical(maximumLength: Int) -> String {
        var text = ""
        write(to: &text, limit: maximumLength)
        guard text.utf8.count > maximumLength else { return text }
        return String(text.prefix(maximumLength)) + "…"
    }

    /// Writes the canonical text, giving up once `text` is longer than `limit` bytes.
    private func write(to text: inout String, limit: Int) {
        guard text.utf8.count <= limit else { return }
        switch self {
        case .topic(let name, _):
            text += "'\(name)' in topics"
        case .not(let operand, _):
            text += "!"
            if case .not = operand {
                operand.write(to: &text, limit: limit)
            } else {
                text += "("
                operand.write(to: &text, limit: limit)
                text += ")"
            }
        case .and(let operands, _):
            for (index, operand) in operands.enumerated() {
                if text.utf8.count > limit { break }
                if index > 0 { text += " && " }
                operand.writeOperand(
                    to: &text, limit: limit, parenthesizing: { if case .or = $0 { true } else { false } })
            }
        case .or(let operands, _):
            for (index, operand) in operands.enumerated() {
                if text.utf8.count > limit { break }
                if index > 0 { text += " || " }
                operand.writeOperand(
                    to: &text, limit: limit, parenthesizing: { if case .and = $0 { true } else { false } })
            }
        }
    }

    private func writeOperand(
        to text: inout String, limit: Int, parenthesizing needsParentheses: (Expression) -> Bool
    ) {
        if needsParentheses(self) {
            text += "("
            write(to: &text, limit: limit)
            text += ")"
        } else {
            write(to: &text, limit: limit)
        }
    }
}
