/// The machine-readable result of checking a condition: what the CLI's `--format json` and the
/// native API's `conditions:check` return.
public struct ConditionReport: Sendable, Hashable, Codable {
    /// One diagnostic with its position spelled out for clients that do not count bytes themselves.
    public struct Finding: Sendable, Hashable, Codable {
        public var severity: Diagnostic.Severity
        public var kind: Diagnostic.Kind
        public var message: String
        public var offset: Int
        public var length: Int
        public var line: Int
        public var column: Int
        public var notes: [String]
        /// The caret rendering, as the CLI prints it.
        public var rendered: String
    }

    public var valid: Bool
    public var dialect: Dialect
    /// The canonical form; `nil` when the condition is not valid.
    public var canonical: String?
    /// Distinct topic names in order of first appearance.
    public var topics: [String]
    /// `'name' in topics` atoms, counting repeats.
    public var topicCount: Int
    /// `&&`, `||` and `!` operators.
    public var operatorCount: Int
    /// The error first (if any), then the warnings.
    public var diagnostics: [Finding]

    /// Checks `source` under `dialect` and reports everything found.
    public init(checking source: String, dialect: Dialect) {
        self.dialect = dialect
        do {
            let condition = try Condition(parsing: source, dialect: dialect)
            valid = true
            canonical = condition.canonical
            topics = condition.topics
            topicCount = condition.topicCount
            operatorCount = condition.operatorCount
            diagnostics = condition.warnings.map { Finding($0, in: source) }
        } catch {
            valid = false
            canonical = nil
            topics = []
            topicCount = 0
            operatorCount = 0
            diagnostics = [Finding(error.diagnostic, in: source)]
        }
    }
}

extension ConditionReport.Finding {
    public init(_ diagnostic: Diagnostic, in source: String) {
        let location = LineColumn(offset: diagnostic.range.offset, in: source)
        self.init(
            severity: diagnostic.severity, kind: diagnostic.kind, message: diagnostic.message,
            offset: diagnostic.range.offset, length: diagnostic.range.length,
            line: location.line, column: location.column, notes: diagnostic.notes,
            rendered: diagnostic.rendered(in: source))
    }
}
