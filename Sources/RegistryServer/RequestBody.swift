import FCMWire
import Foundation
import Hummingbird
import Registry

extension JSONBody {
    /// Reads at most `limit` bytes of the body (more is a 413) and decodes it; an empty body reads as `{}`.
    static func decode<T: Decodable>(_ type: T.Type, from request: Request, limit: Int) async throws -> T {
        var request = request
        return try decode(type, from: try await request.collectBody(upTo: limit).readableBytesView)
    }

    /// The body, read as `object(_:)` does.
    static func object(_ buffer: ByteBuffer) throws -> [String: JSONValue] {
        try object(buffer.readableBytesView)
    }
}

extension PageRequest {
    /// `pageSize` and `pageToken` from the query string of a native listing.
    init(query request: Request) throws {
        self.init(size: try Self.checked(request.query("pageSize").map { Int($0) ?? 0 }), token: request.query("pageToken"))
    }

    /// A page size as the caller gave it: a positive integer, or none.
    static func checked(_ size: Int?) throws -> Int? {
        if let size, size <= 0 { throw BadRequest.pageSizeNotPositive }
        return size
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
