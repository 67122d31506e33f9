import Delivery
import AsyncHTTPClient
import Foundation
import HTTP2FanOut
import NIOCore
import NIOHTTP1
import NIOSSL
import Outbound

/// The relay's one HTTP client, to FCM and to token endpoints: HTTP/2 by ALPN over TLS verified
/// against the system's trust store (plus `--relay-ca-file`), connections pooled and reused, every
/// request bounded in time and every answer in size. Never a way to skip verification.
///
/// async-http-client connects through NIO's `ClientBootstrap.connect(host:port:)`, which races
/// every address of the name as RFC 8305 says (`DualStackConnector` is the same race, for the
/// clients that connect themselves); `UpstreamClientTests` holds it to that with real listeners.
final class UpstreamClient: Sendable {
    /// An answer, cut to what the relay reads.
    struct Answer: Sendable {
        var status: Int
        var retryAfter: Int?
        var body: [UInt8]
        var contentType: String? = nil
    }

    /// FCM's answers are small: a name, or an error with details (the fan-out's bound).
    static let maximumAnswerBytes = UpstreamAnswer.maximumBodyBytes
    /// The longest `Retry-After` taken from an upstream, in seconds: an hour (the fan-out's bound).
    static let maximumRetryAfter = UpstreamAnswer.maximumRetryAfter
    /// How the relay names itself to FCM and token endpoints, on either path.
    static let userAgent = "fcm-registry-relay"

    private let http: HTTPClient
    private let timeout: Duration

    init(options: RelayOptions) throws {
        var tls = TLSConfiguration.makeClientConfiguration()
        if let caFile = options.caFile { tls.additionalTrustRoots = [.file(caFile)] }
        var configuration = HTTPClient.Configuration(
            tlsConfiguration: tls, redirectConfiguration: .disallow,
            timeout: .init(connect: .seconds(10), read: .seconds(Int64(options.requestTimeout.components.seconds))))
        configuration.httpVersion = .automatic
        configuration.decompression = .disabled
        configuration.connectionPool = .init(
            idleTimeout: .seconds(60), concurrentHTTP1ConnectionsPerHostSoftLimit: max(8, options.concurrency / 4))
        http = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
        timeout = options.requestTimeout
    }

    /// Posts `body` and reads the answer.
    /// - Throws: on a connection error or timeout (no answer came).
    func post(_ url: String, contentType: String, authorization: String?, body: [UInt8]) async throws -> Answer {
        try await send(.POST, url, headers: [("Content-Type", contentType)], authorization: authorization, body: body)
    }

    /// Sends a request (a body only with one) and reads the answer.
    /// - Throws: on a connection error or timeout (no answer came).
    func send(
        _ method: HTTPMethod, _ url: String, headers: [(String, String)], authorization: String?, body: [UInt8]?
    ) async throws -> Answer {
        var request = HTTPClientRequest(url: url)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        request.headers.add(name: "User-Agent", value: Self.userAgent)
        if let authorization { request.headers.add(name: "Authorization", value: authorization) }
        if let body { request.body = .bytes(ByteBuffer(bytes: body)) }
        let response: HTTPClientResponse
        do {
            response = try await http.execute(
                request, timeout: .nanoseconds(Int64(timeout.components.seconds) * 1_000_000_000))
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw Self.plain(error, url: request.url)
        }
        var bytes: [UInt8] = []
        do {
            let buffer = try await response.body.collect(upTo: Self.maximumAnswerBytes)
            bytes = Array(buffer.readableBytesView)
        } catch {
            // An answer too large to be FCM's is read by its status alone.
        }
        let retryAfter = response.headers.first(name: "Retry-After").flatMap { Int($0.trimmingCharacters(in: .whitespaces)) }
        return Answer(
            status: Int(response.status.code), retryAfter: retryAfter.map { min(max(0, $0), Self.maximumRetryAfter) },
            body: bytes, contentType: response.headers.first(name: "Content-Type"))
    }

    /// A request's failure in plain words (`ConnectionFailure`), not the client's type dump.
    static func plain(_ error: any Error, url: String) -> ConnectionFailure {
        let place = URLComponents(string: url).map { url in
            let host = url.host ?? "?"
            let port = url.port ?? (url.scheme?.lowercased() == "http" ? 80 : 443)
            return host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        } ?? "the upstream"
        if let client = error as? HTTPClientError {
            switch client {
            case .connectTimeout: return ConnectionFailure("timed out after 10 s connecting to \(place)")
            case .deadlineExceeded, .readTimeout: return ConnectionFailure("no answer in time from \(place)")
            case .remoteConnectionClosed: return ConnectionFailure("\(place) closed the connection before an answer")
            case .cancelled: return ConnectionFailure("cancelled before \(place) answered")
            default: return ConnectionFailure("cannot reach \(place): \(client)")
            }
        }
        return ConnectionFailure(ConnectionFailure.words(for: error))
    }

    func shutdown() async throws {
        try await http.shutdown()
    }
}

extension UpstreamClient.Answer {
    /// FCM's error code: the `FcmError` detail's `errorCode`, else the error's `status`, as the SDKs read it.
    var errorCode: String? { UpstreamClient.errorCode(status: status, body: body) }
}

extension UpstreamAnswer {
    /// FCM's error code in an answer through the fan-out, read as the general client's.
    var errorCode: String? { UpstreamClient.errorCode(status: status, body: body) }
}

extension UpstreamClient {
    /// FCM's error code in an answer: the `FcmError` detail's `errorCode`, else the error's
    /// `status`, as the SDKs read it; `nil` for a success or an answer that is not Google's error JSON.
    static func errorCode(status: Int, body: [UInt8]) -> String? {
        guard !(200..<300).contains(status),
            let json = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any],
            let error = json["error"] as? [String: Any]
        else { return nil }
        for detail in error["details"] as? [[String: Any]] ?? [] {
            if (detail["@type"] as? String)?.hasSuffix("google.firebase.fcm.v1.FcmError") == true,
                let code = detail["errorCode"] as? String
            {
                return code
            }
        }
        return error["status"] as? String
    }
}
