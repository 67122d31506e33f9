import Hummingbird

/// `GET /openapi.json`: the contract of every route, FCM-compatible and native, as OpenAPI 3.1.
///
/// Hand-written (`Resources/openapi.json`), not generated: the FCM-compatible routes answer FCM's
/// exact bytes, shapes no Swift type declares (the legacy API's mixed result arrays, the plain-text
/// form), and the document is the promise the code is checked against (a test compares its paths
/// with the routes; schemathesis in CI compares answers with its schemas), not a copy of the code.
enum OpenAPIDocument {
    static let bytes: [UInt8] = PackageResources.openapi_json

    static var response: Response {
        Response(
            status: .ok, headers: [.contentType: "application/json; charset=UTF-8", .cacheControl: "max-age=300"],
            body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}
