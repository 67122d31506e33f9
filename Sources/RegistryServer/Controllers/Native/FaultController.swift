import FCMWire
import Foundation
import Hummingbird
import Registry

/// `PUT`/`DELETE /api/tokens/{token}/fault` and `/api/fault`: errors the emulator answers on
/// purpose, so that a test suite drives every error path of an app server (`InjectedFault`).
struct FaultController {
    let registry: RegistryService

    func addRoutes(to routes: RouteRecorder) {
        routes.on("/api/tokens/:token/fault", .put, use: setTokenFault)
        routes.on("/api/tokens/:token/fault", .delete, use: removeTokenFault)
        routes.on("/api/fault", .put, use: setProjectFault)
        routes.on("/api/fault", .delete, use: removeProjectFault)
        routes.on("/api/topics/:name/fault", .put, use: setTopicFault)
        routes.on("/api/topics/:name/fault", .delete, use: removeTopicFault)
    }

    /// `{"error":"UNAVAILABLE","times":2,"retryAfter":"2s"}`.
    struct FaultRequest: Decodable {
        var error: String?
        var times: Int?
        var retryAfter: String?
    }

    /// The fault as set: what the next sends meet.
    struct FaultResponse: ResponseEncodable {
        var error: String
        var times: Int?
        var retryAfter: String?
    }

    struct Removed: ResponseEncodable {}

    @Sendable func setTokenFault(_ request: Request, context: RegistryRequestContext) async throws -> FaultResponse {
        let project = try context.requireProject()
        let token = try request.pathValue("token", context: context)
        let fault = try await fault(from: request)
        try await registry.injectFault(fault, token: token, in: project, by: context.actor(request))
        return Self.response(fault)
    }

    @Sendable func removeTokenFault(_ request: Request, context: RegistryRequestContext) async throws -> Removed {
        let project = try context.requireProject()
        let token = try request.pathValue("token", context: context)
        guard try await registry.removeFault(token: token, in: project, by: context.actor(request)) else {
            throw ErrorEnvelope.notFound(.native, ServerWording.tokenHasNoFault)
        }
        return Removed()
    }

    @Sendable func setProjectFault(_ request: Request, context: RegistryRequestContext) async throws -> FaultResponse {
        let project = try context.requireProject()
        let fault = try await fault(from: request)
        try await registry.injectFault(fault, token: nil, in: project, by: context.actor(request))
        return Self.response(fault)
    }

    @Sendable func removeProjectFault(_ request: Request, context: RegistryRequestContext) async throws -> Removed {
        let project = try context.requireProject()
        guard try await registry.removeFault(token: nil, in: project, by: context.actor(request)) else {
            throw ErrorEnvelope.notFound(.native, ServerWording.projectHasNoFault)
        }
        return Removed()
    }

    /// `{"error":"TOPICS_SUBSCRIPTION_RATE_EXCEEDED","times":2,"retryAfter":"2s"}`: the next
    /// subscription calls naming the topic are refused as FCM refuses them (`TopicFault`).
    @Sendable func setTopicFault(_ request: Request, context: RegistryRequestContext) async throws -> FaultResponse {
        let project = try context.requireProject()
        let topic = try request.pathValue("name", context: context)
        let body = try await JSONBody.decode(FaultRequest.self, from: request, limit: registry.limits.requestBodyBytes)
        guard body.error == TopicFault.errorName else { throw BadRequest.unknownFaultKind(TopicFault.errorName) }
        if let times = body.times, !(1...InjectedFault.maximumTimes).contains(times) {
            throw BadRequest.faultTimesOutOfRange(maximum: InjectedFault.maximumTimes)
        }
        let fault = TopicFault(remaining: body.times, retryAfter: try body.retryAfter.map(Self.seconds))
        try await registry.injectTopicFault(fault, topic: topic, in: project, by: context.actor(request))
        return FaultResponse(
            error: TopicFault.errorName, times: fault.remaining, retryAfter: fault.retryAfter.map { "\($0)s" })
    }

    @Sendable func removeTopicFault(_ request: Request, context: RegistryRequestContext) async throws -> Removed {
        let project = try context.requireProject()
        let topic = try request.pathValue("name", context: context)
        guard try await registry.removeTopicFault(topic: topic, in: project, by: context.actor(request)) else {
            throw ErrorEnvelope.notFound(.native, ServerWording.topicHasNoFault)
        }
        return Removed()
    }

    private func fault(from request: Request) async throws -> InjectedFault {
        let body = try await JSONBody.decode(FaultRequest.self, from: request, limit: registry.limits.requestBodyBytes)
        let kinds = InjectedFault.Kind.allCases.map(\.rawValue).joined(separator: ", ")
        guard let name = body.error, let kind = InjectedFault.Kind(rawValue: name) else {
            throw BadRequest.unknownFaultKind(kinds)
        }
        if let times = body.times, !(1...InjectedFault.maximumTimes).contains(times) {
            throw BadRequest.faultTimesOutOfRange(maximum: InjectedFault.maximumTimes)
        }
        let retryAfter = try body.retryAfter.map(Self.seconds)
        return InjectedFault(kind: kind, remaining: body.times, retryAfter: retryAfter)
    }

    /// `"2s"` or `"1.5s"`, as Google writes durations, rounded up to whole seconds.
    static func seconds(_ text: String) throws -> Int {
        guard text.hasSuffix("s"), text.utf8.count <= 16, let value = Double(text.dropLast()), value.isFinite,
            value >= 0, value <= Double(InjectedFault.maximumRetryAfter)
        else {
            throw BadRequest.faultRetryAfterInvalid(maximumSeconds: InjectedFault.maximumRetryAfter)
        }
        return Int(value.rounded(.up))
    }

    static func response(_ fault: InjectedFault) -> FaultResponse {
        FaultResponse(error: fault.kind.rawValue, times: fault.remaining, retryAfter: fault.retryAfter.map { "\($0)s" })
    }
}
