import HTTPTypes
import Hummingbird
import Logging

/// One log line per request at `info`, and the request metrics: method, route (the template, so
/// no token or name from the path), status, duration, request id (`hb.request.id`, already in the
/// logger's metadata) and project id. Never a server key, a token or a body.
struct AccessLogMiddleware: RouterMiddleware {
    typealias Context = RegistryRequestContext

    let metrics: ServerMetrics

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response)
        async throws -> Response
    {
        let start = ContinuousClock.now
        let response: Response
        do {
            response = try await next(request, context)
        } catch {
            // Errors are answered by the envelope middleware inside this one; what still escapes
            // (a 404 of the router itself) is logged with the status Hummingbird will send.
            let status = (error as? any HTTPResponseError)?.status ?? .internalServerError
            record(request, context, status: status, since: start)
            throw error
        }
        record(request, context, status: response.status, since: start)
        return response
    }

    private func record(_ request: Request, _ context: Context, status: HTTPResponse.Status, since start: ContinuousClock.Instant)
    {
        let elapsed = ContinuousClock.now - start
        let route = context.labels.route ?? "unmatched"
        let method = request.method.rawValue
        var metadata: Logger.Metadata = [
            "http.method": "\(method)", "http.route": "\(route)", "http.status": "\(status.code)",
            "duration.ms": "\(Double(elapsed.components.seconds) * 1000 + Double(elapsed.components.attoseconds) / 1e15)",
        ]
        if let project = context.labels.project { metadata["project.id"] = "\(project)" }
        if let client = Self.client(of: request) { metadata["http.client"] = "\(client)" }
        context.logger.info("request", metadata: metadata)
        metrics.request(method: method, route: route, status: status.code, duration: elapsed)
    }

    /// The header a client names itself with, so that the log says who sent a request (the web
    /// console sends `X-Registry-Client: console`). Browsers may not set `User-Agent` from a script.
    static let clientHeader = HTTPField.Name("X-Registry-Client")!

    /// The client's name when it is a short word (letters, digits, `.`, `_`, `/`, `-`; at most 64),
    /// so that nothing a caller sends can forge or break a log line.
    static func client(of request: Request) -> Substring? {
        guard let value = request.headers[clientHeader], (1...64).contains(value.utf8.count),
            value.utf8.allSatisfy(isClientByte)
        else { return nil }
        return Substring(value)
    }

    private static func isClientByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "/"),
            UInt8(ascii: "-"):
            true
        default: false
        }
    }
}
