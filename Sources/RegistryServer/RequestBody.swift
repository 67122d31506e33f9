import Foundation
import Hummingbird
import Registry

/// Request bodies decoded into `Decodable` types, with one mapping from decoding errors to
/// messages that name the field at fault (`registration_ids[2] must be a string`), which every
/// API family words in its own envelope.
enum JSONBody {
    /// Reads at most `limit` bytes of the body (more is a 413) and decodes it; an empty body reads as `{}`.
    static func decode<T: Decodable>(_ type: T.Type, from request: Request, limit: Int) async throws -> T {
        var request = request
        return try decode(type, from: try await request.collectBody(upTo: limit))
    }

    static func decode<T: Decodable>(_ type: T.Type, from buffer: ByteBuffer) throws -> T {
        let data = buffer.readableBytes == 0 ? Data("{}".utf8) : Data(buffer.readableBytesView)
        if let key = buffer.withUnsafeReadableBytes({ DuplicateKeys.first(in: $0) }) {
            throw BadRequest("the request body names \"\(key)\" twice in one object", field: key)
        }
        do {
            return try JSONDecoder().decode(type, from: data)
        } catch let error as DecodingError {
            throw badRequest(error)
        }
    }

    /// The body as a JSON object of any fields (messages, whose codecs read them field by field).
    static func object(_ buffer: ByteBuffer) throws -> [String: JSONValue] {
        try decode([String: JSONValue].self, from: buffer)
    }

    /// The message a decoding error deserves, naming the field.
    static func badRequest(_ error: DecodingError) -> BadRequest {
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
    static func path(_ keys: [any CodingKey]) -> String {
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

extension Request {
    /// A path parameter, percent-decoded: tokens and topic names arrive URL-encoded.
    func pathValue(_ name: String, context: some RequestContext) throws -> String {
        let raw = try context.parameters.require(name)
        return raw.removingPercentEncoding ?? raw
    }

    /// A query parameter, already decoded by Hummingbird.
    func query(_ name: String) -> String? {
        uri.queryParameters[name[...]].map(String.init)
    }

    /// A query flag such as `allow_missing=true`.
    func queryFlag(_ names: String...) -> Bool {
        names.contains { query($0)?.lowercased() == "true" }
    }
}
