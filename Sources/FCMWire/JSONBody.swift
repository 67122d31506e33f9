import Foundation
import Registry

/// Request bodies decoded into `Decodable` types, with one mapping from decoding errors to
/// messages that name the field at fault (`registration_ids[2] must be a string`), which every
/// API family words in its own envelope.
public enum JSONBody {
    /// Decodes `bytes` (an empty body reads as `{}`), refusing a key named twice in one object.
    public static func decode<T: Decodable>(_ type: T.Type, from bytes: some Collection<UInt8>) throws -> T {
        let data = bytes.isEmpty ? Data("{}".utf8) : Data(bytes)
        if let key = data.withUnsafeBytes({ DuplicateKeys.first(in: $0) }) {
            throw BadRequest("the request body names \"\(key)\" twice in one object", field: key)
        }
        do {
            return try JSONDecoder().decode(type, from: data)
        } catch let error as DecodingError {
            throw badRequest(error)
        }
    }

    /// The body as a JSON object of any fields (messages, whose codecs read them field by field).
    public static func object(_ bytes: some Collection<UInt8>) throws -> [String: JSONValue] {
        try decode([String: JSONValue].self, from: bytes)
    }

    /// The message a decoding error deserves, naming the field.
    public static func badRequest(_ error: DecodingError) -> BadRequest {
        switch error {
        case .typeMismatch(let type, let context):
            guard !context.codingPath.isEmpty else { return BadRequest("the request body must be a JSON object") }
            let field = path(context.codingPath)
            return BadRequest("\(field) must be \(describe(type))", field: topLevel(context.codingPath))
        case .valueNotFound(let type, let context):
            let field = path(context.codingPath)
            return BadRequest("\(field) must be \(describe(type))", field: topLevel(context.codingPath))
        case .keyNotFound(let key, let context):
            let field = path(context.codingPath + [key])
            return BadRequest("\(field) is required", field: topLevel(context.codingPath + [key]))
        case .dataCorrupted(let context):
            guard !context.codingPath.isEmpty else { return BadRequest("the request body is not valid JSON") }
            return BadRequest("\(path(context.codingPath)) is not valid", field: topLevel(context.codingPath))
        @unknown default:
            return BadRequest("the request body is not valid JSON")
        }
    }

    /// `registration_ids[2]`, `message.android.ttl`.
    public static func path(_ keys: [any CodingKey]) -> String {
        var text = ""
        for key in keys {
            if let index = key.intValue {
                text += "[\(index)]"
            } else {
                text += text.isEmpty ? key.stringValue : ".\(key.stringValue)"
            }
        }
        return text
    }

    private static func topLevel(_ keys: [any CodingKey]) -> String? {
        keys.first.map(\.stringValue)
    }

    private static func describe(_ type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Bool.Type: "true or false"
        case is Int.Type, is Int64.Type, is Int32.Type: "an integer"
        case is Double.Type, is Float.Type: "a number"
        // Every array in the request types holds strings (tokens, topics).
        case is [Any].Type, is [String].Type: "an array of strings"
        default: "a JSON object"
        }
    }
}

