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
        context.logger.info("request", metadata: metadata)
        metrics.request(method: method, route: route, status: status.code, duration: elapsed)
    }
}
