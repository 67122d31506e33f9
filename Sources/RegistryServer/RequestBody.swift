import Foundation
import Hummingbird

/// A request body read as a JSON object, with messages that say which field is wrong and how.
struct JSONObject {
    private let fields: [String: Any]

    /// Reads at most `limit` bytes of the body; more is a 413 (`NIOTooManyBytesError`).
    init(request: Request, limit: Int) async throws {
        var request = request
        let buffer = try await request.collectBody(upTo: limit)
        try self.init(data: Data(buffer.readableBytesView))
    }

    /// An already parsed object, such as a message nested in a request.
    init(fields: [String: Any]) {
        self.fields = fields
    }

    init(data: Data) throws {
        guard !data.isEmpty else {
            fields = [:]
            return
        }
        let value: Any
        do {
            value = try JSONSerialization.jsonObject(with: data, options: [])
        } catch {
            throw BadRequest("the request body is not valid JSON")
        }
        guard let object = value as? [String: Any] else { throw BadRequest("the request body must be a JSON object") }
        fields = object
    }

    /// The string at `key`; `nil` when absent or null.
    func string(_ key: String) throws -> String? {
        guard let value = fields[key], !(value is NSNull) else { return nil }
        guard let string = value as? String, !(value is NSNumber) else {
            throw BadRequest("\(key) must be a string", field: key)
        }
        return string
    }

    /// The integer at `key`; `nil` when absent or null.
    func integer(_ key: String) throws -> Int? {
        guard let value = fields[key], !(value is NSNull) else { return nil }
        guard let number = value as? NSNumber, !JSONObject.isBoolean(value),
            let integer = Int(exactly: number.doubleValue)
        else {
            throw BadRequest("\(key) must be an integer", field: key)
        }
        return integer
    }

    /// The boolean at `key`; `nil` when absent or null.
    func bool(_ key: String) throws -> Bool? {
        guard let value = fields[key], !(value is NSNull) else { return nil }
        guard JSONObject.isBoolean(value), let flag = value as? Bool else {
            throw BadRequest("\(key) must be true or false", field: key)
        }
        return flag
    }

    /// Whether a parsed JSON value was `true` or `false`: on Linux, `1 as? Bool` succeeds, so the
    /// number's type code tells them apart.
    static func isBoolean(_ value: Any) -> Bool {
        guard let number = value as? NSNumber else { return false }
        return String(cString: number.objCType) == "c"
    }

    /// The raw value at `key`, for fields whose shape is checked elsewhere (message payloads).
    subscript(key: String) -> Any? { fields[key] }

    /// The names of the fields present.
    var keys: Dictionary<String, Any>.Keys { fields.keys }

    /// The array of strings at `key`; `nil` when absent or null.
    func strings(_ key: String) throws -> [String]? {
        guard let value = fields[key], !(value is NSNull) else { return nil }
        guard let array = value as? [Any] else { throw BadRequest("\(key) must be an array of strings", field: key) }
        return try array.enumerated().map { index, element in
            guard let string = element as? String, !(element is NSNumber) else {
                throw BadRequest("\(key)[\(index)] must be a string", field: key)
            }
            return string
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
