import Conditions
import Hummingbird
@testable import RegistryServer
import Synchronization
import Testing

@Suite("Audience answers")
struct AudienceResponseTests {
    private func bytes(_ response: Response) async throws -> [UInt8] {
        let writer = CollectingWriter()
        try await response.body.write(writer)
        return writer.bytes.withLock { $0 }
    }

    @Test(
        "A page written directly is byte for byte what the encoder writes, with and without the keys around it",
        arguments: [true, false])
    func directTokens(full: Bool) async throws {
        let condition = try Condition(parsing: "'a' in topics || 'a' in topics", dialect: .extended)
        let answer = AudienceController.AudienceResponse(
            count: 3, tokens: ["tok1:APA91b-x_y.z", "tok2", "tok3"], nextPageToken: full ? "MTIz" : nil,
            topicCounts: full ? ["a": 3] : nil, condition: full ? condition.canonical : nil,
            warnings: full ? condition.warnings.map { ConditionReport.Finding($0, in: condition.source) } : nil,
            omittedWarnings: full ? 0 : nil)
        let direct = try await bytes(AudienceController.response(answer))
        let encoded = try await bytes(JSONResponse.make(answer))
        #expect(String(decoding: direct, as: UTF8.self) == String(decoding: encoded, as: UTF8.self))
        #expect(full == false || !condition.warnings.isEmpty)
    }
}

/// Collects what a response body writes.
final class CollectingWriter: ResponseBodyWriter, Sendable {
    let bytes = Mutex<[UInt8]>([])

    func write(_ buffer: ByteBuffer) async throws {
        bytes.withLock { $0 += buffer.readableBytesView }
    }

    func finish(_ trailingHeaders: HTTPFields?) async throws {}
}
