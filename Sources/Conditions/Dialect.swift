/// The rules a condition is checked against: FCM's two public dialects and our own.
public enum Dialect: String, Sendable, Hashable, Codable, CaseIterable {
    /// The legacy HTTP and XMPP protocols: `&&` and `||` only, at most two operators.
    case legacy
    /// HTTP v1: `&&`, `||`, `!` and parentheses, at most five topics.
    case v1
    /// The native API: no FCM caps, only the safety limits every dialect has.
    case extended

    /// The most topic atoms a condition may name, or `nil` for no cap.
    public var maximumTopics: Int? {
        switch self {
        case .legacy, .extended: nil
        case .v1: 5
        }
    }

    /// The most `&&` / `||` operators a condition may use, or `nil` for no cap.
    public var maximumOperators: Int? {
        switch self {
        case .legacy: 2
        case .v1, .extended: nil
        }
    }

    /// Whether `!` is part of the dialect.
    public var allowsNegation: Bool { self != .legacy }

    /// Bytes of source accepted before parsing starts; keeps hostile input from costing anything.
    public var maximumLength: Int { 65_536 }

    /// How deep parentheses and `!` may nest; keeps the parser's recursion far from the stack's end.
    public var maximumDepth: Int { 64 }
}
