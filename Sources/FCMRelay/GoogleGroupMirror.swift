import Delivery
import FCMWire
import Foundation
import Logging
import NIOHTTP1
import Registry
import ServiceLifecycle

/// `GroupMirror` over HTTP: Google's device-group API (`/fcm/notification`) and FCM HTTP v1,
/// called with the mirroring project's service account (the JWT-bearer grant's access token,
/// `project_id` and `access_token_auth: true`, as Google asks of OAuth callers), through the
/// relay's bounded client. `--upstream` points it at another server, another fcm-registry
/// playing Google in tests.
///
/// A peer in `serve`'s service group: its HTTP client is closed at shutdown, after the listeners.
public final class GoogleGroupMirror: GroupMirror, Service {
    private let client: UpstreamClient
    private let accessTokens: AccessTokenCache
    private let logger: Logger

    public init(options: RelayOptions, logger: Logger) throws {
        client = try UpstreamClient(options: options)
        accessTokens = AccessTokenCache(client: client)
        self.logger = logger
    }

    /// Waits for the group's shutdown, then closes the HTTP client.
    public func run() async throws {
        try? await gracefulShutdown()
        try await shutdown()
    }

    /// Closes the HTTP client, for a mirror used without a service group (tests).
    public func shutdown() async throws {
        try await client.shutdown()
    }

    public func forward(_ call: MirroredGroupCall, senderID: String, settings stored: ChannelSettings, project: Int64)
        async throws -> MirrorAnswer
    {
        let settings = try Self.settings(stored)
        let url = settings.upstream + "/fcm/notification"
        let answer = try await authorized(settings, project: project) { bearer in
            let headers = [("project_id", senderID), ("access_token_auth", "true")]
            switch call {
            case .lookUp(let name):
                let query = name.addingPercentEncoding(withAllowedCharacters: .urlQueryAllowedValue) ?? name
                return try await self.client.send(
                    .GET, url + "?notification_key_name=" + query, headers: headers, authorization: bearer, body: nil)
            default:
                return try await self.client.send(
                    .POST, url, headers: headers + [("Content-Type", "application/json")], authorization: bearer,
                    body: Self.body(of: call))
            }
        }
        return MirrorAnswer(
            status: answer.status, contentType: answer.contentType, body: answer.body,
            notificationKey: answer.status == 200 ? Self.notificationKey(in: answer.body) : nil)
    }

    public func send(
        _ message: Message, via protocolName: MessageProtocol, toNotificationKey notificationKey: String,
        settings stored: ChannelSettings, project: Int64
    ) async throws -> MessageProblem? {
        let settings = try Self.settings(stored)
        let url = settings.upstream + "/v1/projects/\(settings.firebaseProjectID)/messages:send"
        let body = V1Outgoing.body(
            template: V1Outgoing.template(message, via: protocolName, now: Date()), token: notificationKey)
        let answer = try await authorized(settings, project: project) { bearer in
            try await self.client.post(url, contentType: "application/json", authorization: bearer, body: body)
        }
        guard !(200..<300).contains(answer.status) else { return nil }
        return FCMAnswers.problem(
            for: answer.errorCode ?? "INTERNAL", token: notificationKey, retryAfter: answer.retryAfter)
    }

    /// The mirror's service account and upstream, as `project mirror` stored them.
    private static func settings(_ stored: ChannelSettings) throws(MirrorUnreachable) -> FCMSettings {
        do {
            return try FCMSettings(stored)
        } catch {
            throw MirrorUnreachable("the mirror's settings cannot be read: \(error)")
        }
    }

    /// Runs `request` with the project's access token; a 401 drops the token and tries once more
    /// with a new one, as the Admin SDKs do.
    private func authorized(
        _ settings: FCMSettings, project: Int64, _ request: (String) async throws -> UpstreamClient.Answer
    ) async throws -> UpstreamClient.Answer {
        var answer: UpstreamClient.Answer?
        for _ in 0..<2 {
            let token: String
            do {
                token = try await accessTokens.token(for: project, settings: settings)
            } catch {
                throw MirrorUnreachable("no access token for \(settings.clientEmail): \(error)")
            }
            do {
                answer = try await request("Bearer " + token)
            } catch {
                throw MirrorUnreachable("\(error)")
            }
            guard answer?.status == 401 else { break }
            await accessTokens.drop(project: project, token: token)
        }
        guard let answer else { throw MirrorUnreachable("no answer") }
        return answer
    }

    /// The JSON Google's device-group API takes, from what the app sent.
    static func body(of call: MirroredGroupCall) -> [UInt8] {
        struct Operation: Encodable {
            var operation: String
            var notification_key_name: String?
            var notification_key: String?
            var registration_ids: [String]
        }
        let operation: Operation
        switch call {
        case .create(let name, let tokens):
            operation = Operation(operation: "create", notification_key_name: name, registration_ids: tokens)
        case .add(let name, let key, let tokens):
            operation = Operation(operation: "add", notification_key_name: name, notification_key: key, registration_ids: tokens)
        case .remove(let name, let key, let tokens):
            operation = Operation(
                operation: "remove", notification_key_name: name, notification_key: key, registration_ids: tokens)
        case .lookUp:
            return []
        }
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Array((try? encoder.encode(operation)) ?? Data())
    }

    static func notificationKey(in body: [UInt8]) -> String? {
        guard let json = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] else { return nil }
        return json["notification_key"] as? String
    }
}

extension CharacterSet {
    /// What a query value may hold unescaped.
    static let urlQueryAllowedValue = CharacterSet.urlQueryAllowed.subtracting(CharacterSet(charactersIn: "&=+#?"))
}
