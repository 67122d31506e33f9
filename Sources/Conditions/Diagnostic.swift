/// A finding about a condition: an error that makes it invalid, or a warning about a valid one.
public struct Diagnostic: Sendable, Hashable, Codable {
    public enum Severity: String, Sendable, Hashable, Codable {
        case error
        case warning
    }

    /// What was found. Stable names: clients and tests match on them.
    public enum Kind: String, Sendable, Hashable, Codable, CaseIterable {
        // Errors: lexical.
        case emptyCondition
        case inputTooLong
        case unterminatedQuote
        case emptyTopicName
        case invalidTopicCharacter
        case topicNameTooLong
        case unquotedTopicName
        case unexpectedCharacter
        case singleAmpersand
        case singleBar
        case wordOperator
        // Errors: grammar.
        case expectedInTopics
        case unclosedParenthesis
        case unmatchedClosingParenthesis
        case emptyParentheses
        case missingOperand
        case missingOperator
        case trailingInput
        case nestingTooDeep
        // Errors: the dialect's caps.
        case negationNotAllowed
        case tooManyTopics
        case tooManyOperators
        // Warnings.
        case mixedOperators
        case duplicateTopic
        case alwaysFalse
        case alwaysTrue
    }

    public var severity: Severity
    public var kind: Kind
    public var message: String
    /// Where in the source the finding points.
    public var range: SourceRange
    /// Extra lines shown under the caret, such as the two readings of a mixed expression.
    public var notes: [String]

    public init(_ severity: Severity, _ kind: Kind, _ message: String, at range: SourceRange, notes: [String] = []) {
        self.severity = severity
        self.kind = kind
        self.message = message
        self.range = range
        self.notes = notes
    }
}

/// Why a condition could not be parsed: exactly one error diagnostic, the first one in the source.
public struct ConditionError: Error, Sendable, Hashable {
    public var diagnostic: Diagnostic

    init(_ kind: Diagnostic.Kind, _ message: String, at range: SourceRange, notes: [String] = []) {
        diagnostic = Diagnostic(.error, kind, message, at: range, notes: notes)
    }
}
