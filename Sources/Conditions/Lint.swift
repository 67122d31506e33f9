/// Warnings about conditions that parse but probably do not say what their author meant.
///
/// Every check here is linear in the size of the condition, or bounded by a fixed budget: a
/// condition may be 64 KiB of repeats, and checking it must not cost more than parsing it.
enum Lint {
    /// Above this many distinct topics the truth table (2^n rows) is not worth building.
    static let truthTableTopicLimit = 12

    /// The most node visits the truth table may take: rows (2^topics) times the tree's nodes. Past it
    /// the constant-result check is skipped; 12 topics leave room for 256 nodes, 1 topic for 512 Ki.
    static let truthTableBudget = 1 << 20

    /// Adds the lint warnings for `expression` to `warnings`: repeated topics, then a constant result.
    ///
    /// The constant-result warning is about the whole condition, so it is kept even when the list is
    /// already full (in place of the last warning kept before it).
    static func check(_ expression: Expression, in source: String, into warnings: inout WarningList) {
        let constant = constantResult(of: expression)
        if constant != nil { warnings.reserveOne() }
        duplicateTopics(in: expression, source: source, into: &warnings)
        if let constant { warnings.appendReserved(constant) }
    }

    // MARK: - Repeated topics

    /// One warning per topic named more than once, pointing at its first repeat and saying how many
    /// times it is named and where it first stood.
    ///
    /// One warning per topic rather than per repeat: `'a' in topics || 'a' in topics || …` says one
    /// thing however often it repeats. The places of the first appearances are found in one pass.
    private static func duplicateTopics(
        in expression: Expression, source: String, into warnings: inout WarningList
    ) {
        struct Uses {
            var first: SourceRange
            var firstRepeat: SourceRange?
            var count = 1
        }
        var uses: [String: Uses] = [:]
        var repeated: [String] = []  // in order of their first repeat
        expression.forEachTopic { name, range in
            if uses[name] == nil {
                uses[name] = Uses(first: range)
            } else {
                uses[name]!.count += 1
                if uses[name]!.firstRepeat == nil {
                    uses[name]!.firstRepeat = range
                    repeated.append(name)
                }
            }
        }
        let shown = repeated.prefix(warnings.room)
        let firstPlaces = SourceLocation.locate(shown.map { uses[$0]!.first.offset }, in: source)
        for (name, place) in zip(shown, firstPlaces) {
            let use = uses[name]!
            let at = place.lineColumn
            let times = use.count == 2 ? "more than once" : "\(use.count) times"
            warnings.append {
                Diagnostic(
                    .warning, .duplicateTopic, "topic '\(name)' is named \(times) (first at \(at.line):\(at.column))",
                    at: use.firstRepeat!)
            }
        }
        warnings.omit(repeated.count - shown.count)
    }

    // MARK: - Constant result

    /// Whether a condition reaches every token, none, or some, as far as the truth table could tell.
    enum Constancy: Sendable, Hashable {
        case varies
        case alwaysTrue
        case alwaysFalse
        /// The truth table was not built: too many topics, or rows times nodes over `truthTableBudget`.
        case notChecked
    }

    /// Evaluates every combination of the topics, if that fits the budget.
    static func constancy(of expression: Expression) -> Constancy {
        let topics = expression.topics
        guard topics.count <= truthTableTopicLimit,
            (1 << topics.count) * expression.nodeCount <= truthTableBudget
        else { return .notChecked }
        let index = Dictionary(uniqueKeysWithValues: topics.enumerated().map { ($1, $0) })
        let compiled = Indexed(expression, topicIndex: index)
        var seenTrue = false
        var seenFalse = false
        for row in 0..<(1 << topics.count) {
            if compiled.matches(row) { seenTrue = true } else { seenFalse = true }
            if seenTrue && seenFalse { return .varies }
        }
        return seenTrue ? .alwaysTrue : .alwaysFalse
    }

    /// A condition that matches every token or none, found by evaluating every combination of its topics.
    private static func constantResult(of expression: Expression) -> Diagnostic? {
        switch constancy(of: expression) {
        case .varies, .notChecked:
            nil
        case .alwaysTrue:
            Diagnostic(
                .warning, .alwaysTrue,
                "this condition is always true: it reaches every token, including tokens with no topic",
                at: expression.range)
        case .alwaysFalse:
            Diagnostic(
                .warning, .alwaysFalse, "this condition is always false: it reaches no token", at: expression.range)
        }
    }

    /// The tree with each topic replaced by its bit in a truth-table row, so a row is evaluated
    /// without hashing topic names.
    private indirect enum Indexed {
        case topic(Int)
        case not(Indexed)
        case and([Indexed])
        case or([Indexed])

        init(_ expression: Expression, topicIndex: [String: Int]) {
            switch expression {
            case .topic(let name, _): self = .topic(topicIndex[name]!)
            case .not(let operand, _): self = .not(Indexed(operand, topicIndex: topicIndex))
            case .and(let operands, _): self = .and(operands.map { Indexed($0, topicIndex: topicIndex) })
            case .or(let operands, _): self = .or(operands.map { Indexed($0, topicIndex: topicIndex) })
            }
        }

        func matches(_ row: Int) -> Bool {
            switch self {
            case .topic(let bit): row & (1 << bit) != 0
            case .not(let operand): !operand.matches(row)
            case .and(let operands): operands.allSatisfy { $0.matches(row) }
            case .or(let operands): operands.contains { $0.matches(row) }
            }
        }
    }
}
