/// A request that cannot be understood: bad JSON, a missing field, a wrong type.
/// The message says what is wrong; each family wraps it in its own envelope.
public struct BadRequest: Error, Sendable {
    public var message: String
    /// The request field at fault, for Google's `fieldViolations`.
    public var field: String?

    public init(_ message: String, field: String? = nil) {
        self.message = message
        self.field = field
    }
}
