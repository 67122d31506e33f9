import FCMWire
import Hummingbird
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
            throw BadRequest("operation is required: create, add or remove")
        }
        let name = body.notification_key_name
        let key = body.notification_key
        guard let tokens = body.registration_ids else {
            throw BadRequest("registration_ids is required")
        }
        switch operation.lowercased() {
        case "create":
            guard let name else { throw BadRequest("notification_key_name is required to create a group") }
            let issued = try await registry.createGroup(named: name, tokens: tokens, in: project)
            return Self.keyResponse(issued)
        case "add", "remove":
            guard let key else { throw BadRequest("notification_key is required to \(operation.lowercased()) members") }
            if operation.lowercased() == "add" {
                _ = try await registry.addToGroup(notificationKey: key, expectedName: name, tokens: tokens, in: project)
            } else {
                _ = try await registry.removeFromGroup(
                    notificationKey: key, expectedName: name, tokens: tokens, in: project)
            }
            return try JSONResponse.make(["notification_key": key])
        default:
            throw BadRequest("unknown operation '\(operation)': use create, add or remove")
        }
    }

    @Sendable func lookUp(_ request: Request, context: RegistryRequestContext) async throws -> Response {
        let project = try context.requireProject()
        guard let name = request.query("notification_key_name"), !name.isEmpty else {
            throw BadRequest("notification_key_name is required")
        }
        return Self.keyResponse(try await registry.notificationKey(forGroupNamed: name, in: project))
    }
}
