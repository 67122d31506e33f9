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
    /// The error first (if any), then the warnings (at most `Condition.maximumWarnings`).
    public var diagnostics: [Finding]
    /// Warnings found but left out of `diagnostics` by the cap.
    public var omittedWarnings: Int

    /// Checks `source` under `dialect` and reports everything found.
    ///
    /// The report's size does not grow with the number of findings: warnings are capped, each
    /// rendering shows a window of its line, and notes carry excerpts. Only the canonical form and the
    /// topic list grow with the input. The findings are located in one pass over `source`.
    public init(checking source: String, dialect: Dialect) {
        self.dialect = dialect
        do {
            let condition = try Condition(parsing: source, dialect: dialect)
            valid = true
            canonical = condition.canonical
            topics = condition.topics
            topicCount = condition.topicCount
            operatorCount = condition.operatorCount
            diagnostics = Finding.findings(for: condition.warnings, in: source)
            omittedWarnings = condition.omittedWarnings
        } catch {
            valid = false
            canonical = nil
            topics = []
            topicCount = 0
            operatorCount = 0
            diagnostics = [Finding(error.diagnostic, in: source)]
            omittedWarnings = 0
        }
    }
}

extension ConditionReport.Finding {
    public init(_ diagnostic: Diagnostic, in source: String) {
        self.init(diagnostic, in: source, at: SourceLocation.locate([diagnostic.range.offset], in: source)[0])
    }

    /// The findings for `diagnostics`, located together in one pass over `source`.
    static func findings(for diagnostics: [Diagnostic], in source: String) -> [Self] {
        let locations = SourceLocation.locate(diagnostics.map(\.range.offset), in: source)
        return zip(diagnostics, locations).map { Self($0, in: source, at: $1) }
    }

    private init(_ diagnostic: Diagnostic, in source: String, at location: SourceLocation) {
        self.init(
            severity: diagnostic.severity, kind: diagnostic.kind, message: diagnostic.message,
            offset: diagnostic.range.offset, length: diagnostic.range.length,
            line: location.lineColumn.line, column: location.lineColumn.column, notes: diagnostic.notes,
            rendered: diagnostic.rendered(in: source, at: location))
    }
}
