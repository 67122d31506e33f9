import Conditions
import FCMWire
import Foundation
import Hummingbird
import Registry

/// `POST /api/audiences:resolve` and `POST /api/conditions:check`: what FCM never told anyone.
struct AudienceController {
    let registry: RegistryService

    func addRoutes(to routes: RouteRecorder) {
        routes.on("/api/audiences:resolve", .post, use: resolve)
        routes.on("/api/conditions:check", .post, use: check)
    }

    /// The answer of `POST /api/audiences:resolve`; its tokens are written by hand (`response(_:)`).
    struct AudienceResponse: Encodable, ResponseGenerator {
        var count: Int
        var tokens: [String]?
        var nextPageToken: String?
        var topicCounts: [String: Int]?
        var condition: String?
        var warnings: [ConditionReport.Finding]?
        /// Warnings past the cap, counted but not listed.
        var omittedWarnings: Int?

        func response(from request: Request, context: some RequestContext) throws -> Response {
            try AudienceController.response(self)
        }
    }

    /// Exactly one target, with paging and a dialect for conditions.
    struct ResolveRequest: Decodable {
        var token: String?
        var notificationKey: String?
        /// Deprecated spelling of `notificationKey`, still read.
        var notification_key: String?
        var group: String?
        var topic: String?
        var condition: String?
        var dialect: String?
        var pageSize: Int?
        var pageToken: String?
        var countOnly: Bool?
        /// Only the tokens that say what it asks (`AudienceWhereCodec`).
        var `where`: JSONValue?
    }

    struct CheckRequest: Decodable {
        var condition: String?
        var dialect: String?
    }

    @Sendable func resolve(_ request: Request, context: RegistryRequestContext) async throws -> AudienceResponse {
        let project = try context.requireProject()
        let body = try await JSONBody.decode(ResolveRequest.self, from: request, limit: registry.limits.requestBodyBytes)
        let dialect = try Self.dialect(body.dialect, default: .extended)
        var targets: [AudienceTarget] = []
        if let token = body.token { targets.append(.token(token)) }
        if let key = body.notificationKey { targets.append(.notificationKey(key)) }
        if let key = body.notification_key { targets.append(.notificationKey(key)) }
        if let group = body.group { targets.append(.group(group)) }
        if let topic = body.topic { targets.append(.topic(topic)) }
        if let condition = body.condition { targets.append(.condition(condition, dialect)) }
        guard targets.count == 1, let target = targets.first else {
            throw BadRequest.oneAudienceTarget
        }
        let page = PageRequest(size: try PageRequest.checked(body.pageSize), token: body.pageToken)
        let pageSize = page.size
        let after = try page.tokenID(in: .audience)
        let countOnly = body.countOnly ?? false
        let filter = try AudienceWhereCodec.filter(from: body.where)
        let audience: Audience
        do {
            audience = try await registry.resolve(
                target, in: project, after: after, pageSize: pageSize, countOnly: countOnly, where: filter)
        } catch let error as ConditionError {
            throw Self.invalidCondition(error, source: body.condition ?? "")
        }
        return AudienceResponse(
                count: audience.count, tokens: audience.tokens,
                nextPageToken: audience.nextPageToken,
                topicCounts: audience.topicCounts, condition: audience.condition?.canonical,
                warnings: audience.condition.map { condition in
                    condition.warnings.map { ConditionReport.Finding($0, in: condition.source) }
                },
                omittedWarnings: audience.condition.map(\.omittedWarnings))
    }

    /// The answer, with a page of tokens written straight into the body: a page of 1,000 tokens is
    /// most of it, and token values are plain ASCII that needs no escaping (checked as they are
    /// written: any other byte sends the whole answer through the encoder). Keys stay sorted, as
    /// everywhere.
    static func response(_ answer: AudienceResponse) throws -> Response {
        guard let tokens = answer.tokens else { return try JSONResponse.make(answer) }
        var rest = answer
        rest.tokens = nil
        let head = Array(try JSONResponse.encoder().encode(rest))
        // Sorted keys: "tokens" comes before "topicCounts" and "warnings", after every other key.
        // Keys are the only places a quote is not escaped, so these byte strings find keys.
        let later = [",\"topicCounts\":", ",\"warnings\":"].map { Array($0.utf8) }
        let insertion = later.compactMap { head.firstRange(of: $0)?.lowerBound }.min() ?? head.count - 1
        var body = ByteBuffer()
        body.reserveCapacity(head.count + tokens.reduce(16) { $0 + $1.utf8.count + 3 })
        body.writeBytes(head[..<insertion])
        body.writeStaticString(",\"tokens\":[")
        for (index, token) in tokens.enumerated() {
            if index > 0 { body.writeInteger(UInt8(ascii: ",")) }
            body.writeInteger(UInt8(ascii: "\""))
            guard Self.writePlain(token, to: &body) else { return try JSONResponse.make(answer) }
            body.writeInteger(UInt8(ascii: "\""))
        }
        body.writeInteger(UInt8(ascii: "]"))
        body.writeBytes(head[insertion...])
        return Response(
            status: .ok, headers: [.contentType: "application/json; charset=UTF-8"], body: .init(byteBuffer: body))
    }

    /// Writes `token` when it is printable ASCII other than a quote or a backslash, which JSON
    /// takes as it is; writes nothing and answers false otherwise.
    private static func writePlain(_ token: String, to body: inout ByteBuffer) -> Bool {
        var token = token
        return token.withUTF8 { bytes in
            for byte in bytes where byte < 0x20 || byte >= 0x7F || byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "\\") {
                return false
            }
            body.writeBytes(bytes)
            return true
        }
    }

    @Sendable func check(_ request: Request, context: RegistryRequestContext) async throws -> Response {
        var request = request
        let buffer = try await request.collectBody(upTo: registry.limits.requestBodyBytes)
        // Decoding the body, checking the condition and encoding the report all grow with the
        // condition (up to 64 KiB of it): all three run as costly work, off the threads that answer
        // every other request.
        return try await registry.runCostly {
            let body = try JSONBody.decode(CheckRequest.self, from: buffer.readableBytesView)
            guard let condition = body.condition else { throw BadRequest.conditionRequired }
            let dialect = try Self.dialect(body.dialect, default: .extended)
            return try JSONResponse.make(ConditionReport(checking: condition, dialect: dialect))
        }
    }

    // MARK: - Helpers

    static func dialect(_ name: String?, default fallback: Dialect) throws -> Dialect {
        guard let name else { return fallback }
        guard let dialect = Dialect(rawValue: name) else {
            throw BadRequest.unknownDialect
        }
        return dialect
    }

    /// 400 with the diagnostic: where the condition is wrong, and the caret rendering.
    static func invalidCondition(_ error: ConditionError, source: String) -> APIError {
        struct Body: Encodable {
            struct Inner: Encodable {
                var code = "invalid_condition"
                var message: String
                var diagnostic: ConditionReport.Finding
            }
            var error: Inner
        }
        let finding = ConditionReport.Finding(error.diagnostic, in: source)
        let data =
            (try? JSONResponse.encoder().encode(Body(error: .init(message: finding.message, diagnostic: finding))))
            ?? Data()
        return APIError(status: .badRequest, body: Array(data))
    }
}
