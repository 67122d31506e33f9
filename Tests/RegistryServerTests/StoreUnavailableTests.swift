import HTTPTypes
import Hummingbird
import Logging
import NIOCore
import Registry
@testable import RegistryServer
import Testing

/// A lost database is answered as FCM answers its own outages: 503 with `Retry-After`, in the
/// envelope of the API called, never as an internal error.
@Suite("A database out of reach")
struct StoreUnavailableTests {
    struct Lost: StoreConnectionFailure {
        var meansUnavailable: Bool
        var summary: String { "connection refused" }
    }

    func answer(to error: any Error, path: String) -> APIError {
        let request = Request(
            head: HTTPRequest(method: .post, scheme: "http", authority: "localhost", path: path),
            body: RequestBody(buffer: ByteBuffer()))
        return ErrorEnvelope.apiError(for: error, request: request, logger: Logger(label: "test"))
    }

    @Test(
        "503 with Retry-After in every API's envelope",
        arguments: [
            ("/fcm/send", #"{"error":"Unavailable: the database cannot be reached; try again shortly"}"#),
            ("/iid/v1:batchAdd", #"{"error":"UNAVAILABLE"}"#),
            ("/v1/projects/p/messages:send", #""status":"UNAVAILABLE""#),
            ("/api/projects", #""code":"unavailable""#),
        ])
    func unavailable(path: String, body: String) {
        let answer = answer(to: Lost(meansUnavailable: true), path: path)
        #expect(answer.status == .serviceUnavailable)
        #expect(answer.headers[.retryAfter] == "1")
        #expect(String(decoding: answer.body, as: UTF8.self).contains(body))
    }

    @Test("A failure that may have written (a commit cut off) stays an internal error")
    func mayHaveWritten() {
        #expect(answer(to: Lost(meansUnavailable: false), path: "/fcm/send").status == .internalServerError)
    }
}
