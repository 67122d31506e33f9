/// Warnings about conditions that parse but probably do not say what their author meant.
enum Lint {
    /// Above this many distinct topics the truth table (2^n rows) is not worth building.
    static let truthTableTopicLimit = 12

    static func warnings(for expression: Expression, in source: String) -> [Diagnostic] {
        duplicateTopics(in: expression, source: source) + constantResult(of: expression)
    }

    /// Each repeat of a topic, pointing at the repeat and naming where it first appeared.
    private static func duplicateTopics(in expression: Expression, source: String) -> [Diagnostic] {
        var first: [String: SourceRange] = [:]
        var found: [Diagnostic] = []
        expression.forEachTopic { name, range in
            if let earlier = first[name] {
                let at = LineColumn(offset: earlier.offset, in: source)
                found.append(
                    Diagnostic(
                        .warning, .duplicateTopic,
                        "topic '\(name)' is named more than once (first at \(at.line):\(at.column))", at: range))
            } else {
                first[name] = range
            }
        }
        return found
    }

    /// A condition that matches every token or none, found by evaluating every combination of its topics.
    private static func constantResult(of expression: Expression) -> [Diagnostic] {
        let topics = expression.topics
        guard topics.count <= truthTableTopicLimit else { return [] }
        let index = Dictionary(uniqueKeysWithValues: topics.enumerated().map { ($1, $0) })
        var seenTrue = false
        var seenFalse = false
        for row in 0..<(1 << topics.count) {
            let result = expression.matches { row & (1 << index[$0]!) != 0 }
            if result { seenTrue = true } else { seenFalse = true }
            if seenTrue && seenFalse { return [] }
        }
        return seenTrue
            ? [
                Diagnostic(
                    .warning, .alwaysTrue,
                    "this condition is always true: it reaches every token, including tokens with no topic",
                    at: expression.range)
            ]
            : [
                Diagnostic(
                    .warning, .alwaysFalse, "this condition is always false: it reaches no token", at: expression.range)
            ]
    }
}
