import FCMWire
import Hummingbird
import Logging
import Registry

/// FCM's device-group API: `POST /fcm/notification` (create, add, remove) and `GET /fcm/notification`.
struct DeviceGroupController {
    let registry: RegistryService

    func addRoutes(to routes: RouteRecorder) {
        routes.on("/fcm/notification", .post, use: operate)
        routes.on("/fcm/notification", .get, use: lookUp)
    }

    /// The answer to every successful operation: `{"notification_key":"APA91b…"}`.
    /// Written by hand: keys are URL-safe base64, nothing in them needs escaping.
    static func keyResponse(_ key: String) -> Response {
        Response(
            status: .ok, headers: [.contentType: "application/json; charset=UTF-8"],
            body: .init(byteBuffer: ByteBuffer(string: #"{"notification_key":""# + key + #""}"#)))
    }

    /// `{"operation":…,"notification_key_name":…,"notification_key":…,"registration_ids":[…]}`.
    struct OperationRequest: Decodable {
        var operation: String?
        var notification_key_name: String?
        var notification_key: String?
        var registration_ids: [String]?
    }

    @Sendable func operate(_ request: Request, context: RegistryRequestContext) async throws -> Response {
        let project = try context.requireProject()
        let body = try await JSONBody.decode(
            OperationRequest.self, from: request, limit: registry.limits.requestBodyBytes)
        guard let operation = body.operation else {
            throw BadRequest.groupOperationRequired
        }
        guard let tokens = body.registration_ids else {
            throw BadRequest.registrationIDsRequired
        }
        let call = try Self.call(operation, name: body.notification_key_name, key: body.notification_key, tokens: tokens)
        if let answer = try await mirrored(call, in: project, logger: context.logger) { return Self.response(answer) }
        switch call {
        case .create(let name, let tokens):
            return Self.keyResponse(try await registry.createGroup(named: name, tokens: tokens, in: project))
        case .add(let name, let key, let tokens):
            _ = try await registry.addToGroup(notificationKey: key, expectedName: name, tokens: tokens, in: project)
            return try JSONResponse.make(["notification_key": key])
        case .remove(let name, let key, let tokens):
            _ = try await registry.removeFromGroup(notificationKey: key, expectedName: name, tokens: tokens, in: project)
            return try JSONResponse.make(["notification_key": key])
        case .lookUp(let name):
            return Self.keyResponse(try await registry.notificationKey(forGroupNamed: name, in: project))
        }
    }

    @Sendable func lookUp(_ request: Request, context: RegistryRequestContext) async throws -> Response {
        let project = try context.requireProject()
        guard let name = request.query("notification_key_name"), !name.isEmpty else {
            throw BadRequest.groupNameRequired
        }
        if let answer = try await mirrored(.lookUp(name: name), in: project, logger: context.logger) {
            return Self.response(answer)
        }
        return Self.keyResponse(try await registry.notificationKey(forGroupNamed: name, in: project))
    }

    /// The call a POST asks for, as it is answered here or forwarded by the mirror.
    static func call(_ operation: String, name: String?, key: String?, tokens: [String]) throws -> MirroredGroupCall {
        switch operation.lowercased() {
        case "create":
            guard let name else { throw BadRequest.groupNameRequiredToCreate }
            return .create(name: name, tokens: tokens)
        case "add", "remove":
            guard let key else { throw BadRequest.notificationKeyRequired(toChange: operation.lowercased()) }
            return operation.lowercased() == "add"
                ? .add(name: name, key: key, tokens: tokens) : .remove(name: name, key: key, tokens: tokens)
        default:
            throw BadRequest.unknownGroupOperation(operation)
        }
    }

    /// The call through the mirror, when the project mirrors; what the mirror cannot vouch for is
    /// answered as an error in FCM's device-group envelope (`{"error":"…"}`), never as a success:
    /// 502 when Google's answer is unusable or refuses the mirror's service account (the fault is
    /// upstream, or in the mirror's configuration, not in the app's request), 500 when Google
    /// accepted and this registry could not record it.
    private func mirrored(_ call: MirroredGroupCall, in project: Project, logger: Logger) async throws
        -> MirrorAnswer?
    {
        do {
            let answer = try await registry.mirrored(call, in: project)
            if let reason = answer?.keyNotKept {
                logger.warning("the key of a mirrored look-up was not kept", metadata: ["reason": "\(reason)"])
            }
            return answer
        } catch let fault as MirrorFault {
            switch fault {
            case .unusableAnswer, .credentialsRefused:
                logger.warning("the device-group mirror cannot use Google's answer", metadata: ["error": "\(fault)"])
                throw APIError.plain(.badGateway, "\(fault)")
            case .notRecorded:
                logger.error("the device-group mirror could not record a change", metadata: ["error": "\(fault)"])
                throw APIError.plain(.internalServerError, "\(fault)")
            }
        }
    }

    /// Google's answer, as Google gave it: the status, the body and its type.
    static func response(_ answer: MirrorAnswer) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = answer.contentType ?? "application/json; charset=UTF-8"
        return Response(
            status: .init(code: answer.status), headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: answer.body)))
    }
}
