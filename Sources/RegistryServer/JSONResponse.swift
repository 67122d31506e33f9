import Foundation
import Hummingbird
import Registry

/// JSON responses, encoded the same way everywhere.
enum JSONResponse {
    static func encoder() -> JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(Timestamp.rfc3339(date))
        }
        return encoder
    }

    static func make(_ value: some Encodable, status: HTTPResponse.Status = .ok) throws -> Response {
        let data = try encoder().encode(value)
        return Response(
            status: status, headers: [.contentType: "application/json; charset=UTF-8"],
            body: .init(byteBuffer: ByteBuffer(bytes: data)))
    }

    /// A response from loosely typed JSON (the legacy protocol's mixed shapes).
    static func any(_ value: [String: Any], status: HTTPResponse.Status = .ok) throws -> Response {
        try anyAnswer(value, status: status).response
    }

    /// `any`'s answer as bytes, to be kept for an `Idempotency-Key`.
    static func anyAnswer(_ value: [String: Any], status: HTTPResponse.Status = .ok) throws -> StoredAnswer {
        let data = try JSONSerialization.data(withJSONObject: value, options: [.sortedKeys, .withoutEscapingSlashes])
        return StoredAnswer(
            status: status, headers: [.contentType: "application/json; charset=UTF-8"], body: Array(data))
    }

    /// `make`'s answer as bytes, to be kept for an `Idempotency-Key`.
    static func answer(_ value: some Encodable, status: HTTPResponse.Status = .ok) throws -> StoredAnswer {
        StoredAnswer(
            status: status, headers: [.contentType: "application/json; charset=UTF-8"],
            body: Array(try encoder().encode(value)))
    }

    /// `text/plain`, the answer of the legacy protocol's plain-text requests.
    static func text(_ text: String, status: HTTPResponse.Status = .ok) -> Response {
        textAnswer(text, status: status).response
    }

    /// `text`'s answer as bytes, to be kept for an `Idempotency-Key`.
    static func textAnswer(_ text: String, status: HTTPResponse.Status = .ok) -> StoredAnswer {
        StoredAnswer(status: status, headers: [.contentType: "text/plain; charset=UTF-8"], body: Array(text.utf8))
    }

    /// `{}`, FCM's empty success.
    static func empty() -> Response {
        Response(
            status: .ok, headers: [.contentType: "application/json; charset=UTF-8"],
            body: .init(byteBuffer: ByteBuffer(string: "{}")))
    }
}

/// How a route's typed answer (`ResponseEncodable`) becomes bytes: as `JSONResponse.make` does.
public struct RegistryResponseEncoder: ResponseEncoder {
    public func encode(_ value: some Encodable, from request: Request, context: some RequestContext) throws -> Response {
        try JSONResponse.make(value)
    }
}

/// The time formats of FCM's answers.
enum Timestamp {
    /// RFC 3339 in UTC with milliseconds, as v1's `create_time`: `2026-01-15T01:30:15.010Z`.
    static func rfc3339(_ date: Date) -> String {
        EpochMilliseconds.rfc3339(date)
    }

    /// `YYYY-MM-DD` in UTC, as IID's `addDate`.
    static func day(_ date: Date) -> String {
        date.formatted(Date.ISO8601FormatStyle(timeZone: .gmt).year().month().day())
    }
}
