/// One lexical unit of a condition, with where it stands in the source.
struct Token: Sendable, Hashable {
    enum Kind: Sendable, Hashable {
        /// A quoted topic name, quotes removed; already checked against the topic-name rules.
        case topic(String)
        /// A bare word: `in`, `topics`, or something that should not be there (`and`, an unquoted name).
        case word(String)
        case and
        case or
        case not
        case leftParenthesis
        case rightParenthesis
        case end
    }

    var kind: Kind
    var range: SourceRange

    /// How the token reads in a message: quoted source text, or "the end of the condition".
    var description: String {
        switch kind {
        case .topic(let name): "'\(name)'"
        case .word(let word): "'\(word)'"
        case .and: "'&&'"
        case .or: "'||'"
        case .not: "'!'"
        case .leftParenthesis: "'('"
        case .rightParenthesis: "')'"
        case .end: "the end of the condition"
        }
    }
}
