/// Any JSON value, for the parts of a message whose shape the sender chooses (data values of the
/// legacy protocols, notification fields, v1 platform blocks).
public enum JSONValue: Sendable, Hashable, Codable {
    case string(String)
    case number(Double)
    case bool(Bool)
    case null
    case array([JSONValue])
    case object([String: JSONValue])

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Double.self) {
            self = .number(value)
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let value = try? container.decode([JSONValue].self) {
            self = .array(value)
        } else {
            self = .object(try container.decode([String: JSONValue].self))
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .string(let value): try container.encode(value)
        case .number(let value):
            if let integer = Int64(exactly: value) { try container.encode(integer) } else { try container.encode(value) }
        case .bool(let value): try container.encode(value)
        case .null: try container.encodeNil()
        case .array(let value): try container.encode(value)
        case .object(let value): try container.encode(value)
        }
    }

    public var string: String? {
        if case .string(let value) = self { value } else { nil }
    }

    public var object: [String: JSONValue]? {
        if case .object(let value) = self { value } else { nil }
    }

    /// `null` means "not set" in Google's JSON mapping and in FCM's legacy bodies.
    public var isNull: Bool { self == .null }

    /// Bytes this value counts toward a payload: a string's UTF-8, anything else its JSON text.
    public var payloadBytes: Int {
        switch self {
        case .string(let value): value.utf8.count
        case .number(let value): (Int64(exactly: value).map { String($0) } ?? String(value)).utf8.count
        case .bool(let value): value ? 4 : 5
        case .null: 4
        case .array(let values): values.reduce(1) { $0 + $1.payloadBytes + 1 }
        case .object(let fields): fields.reduce(1) { $0 + $1.key.utf8.count + 3 + $1.value.payloadBytes + 1 }
        }
    }
}
