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
        if answer.status == 401 || answer.status == 403 {
            // The app's own key was checked here: Google's refusal is of the mirror's service account.
            throw MirrorFault.credentialsRefused(
                status: answer.status, account: settings.clientEmail, words: Self.errorWords(in: answer.body))
        }
        guard answer.status == 200 else {
            return MirrorAnswer(
                status: answer.status, contentType: answer.contentType, body: answer.body, notificationKey: nil)
        }
        switch Self.usableKey(in: answer.body) {
        case .success(let key):
            return MirrorAnswer(status: 200, contentType: answer.contentType, body: answer.body, notificationKey: key)
        case .failure(let fault):
            throw fault
        }
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
            } catch let refused as AccessTokenCache.Refused where (400..<500).contains(refused.status ?? 0) {
                // The token endpoint refused the account (revoked, deleted, a key rotated away).
                throw MirrorFault.credentialsRefused(
                    status: refused.status ?? 0, account: settings.clientEmail, words: "its token endpoint refused it")
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

    /// The `notification_key` of a 200 answer, one this registry can keep as a name of the group;
    /// else what the answer was instead. The body was read up to `UpstreamClient.maximumAnswerBytes`:
    /// a longer one comes empty.
    static func usableKey(in body: [UInt8]) -> Result<String, MirrorFault> {
        guard !body.isEmpty else {
            return .failure(.unusableAnswer("an empty body, or one over 64 KiB, which is not read"))
        }
        guard let text = String(validating: body, as: UTF8.self) else {
            return .failure(.unusableAnswer("bytes that are not UTF-8"))
        }
        guard let json = try? JSONSerialization.jsonObject(with: Data(body), options: [.fragmentsAllowed]) else {
            return .failure(.unusableAnswer("not JSON: \(excerpt(text))"))
        }
        guard let object = json as? [String: Any] else {
            return .failure(.unusableAnswer("JSON that is not an object: \(excerpt(text))"))
        }
        guard let key = object["notification_key"] as? String else {
            return .failure(.unusableAnswer("a JSON object without a notification_key string"))
        }
        guard NotificationKeyCodec.isImportable(key) else {
            return .failure(
                .unusableAnswer(
                    "a notification_key that is not one Google issues (APA91b…, under 512 characters of [A-Za-z0-9_:.-]): \(excerpt(key))"
                ))
        }
        return .success(key)
    }

    /// What an error answer says, as FCM words it (`{"error":"…"}` or Google's `{"error":{"message":…}}`).
    static func errorWords(in body: [UInt8]) -> String {
        guard let json = try? JSONSerialization.jsonObject(with: Data(body)) as? [String: Any] else { return "" }
        if let words = json["error"] as? String { return excerpt(words, limit: 200) }
        if let error = json["error"] as? [String: Any], let words = error["message"] as? String {
            return excerpt(words, limit: 200)
        }
        return ""
    }

    /// The start of an upstream's text, quoted, safe to show and to log: at most `limit`
    /// characters, anything but printable ASCII escaped.
    static func excerpt(_ text: String, limit: Int = 60) -> String {
        var shown = ""
        for scalar in text.unicodeScalars.prefix(limit) {
            let printable = (0x20..<0x7F).contains(scalar.value) && scalar != "\"" && scalar != "\\"
            shown += printable ? String(scalar) : "\\u{\(String(scalar.value, radix: 16))}"
        }
        return "\"" + shown + (text.unicodeScalars.count > limit ? "…" : "") + "\""
    }
}

extension CharacterSet {
    /// What a query value may hold unescaped.
    static let urlQueryAllowedValue = CharacterSet.urlQueryAllowed.subtracting(CharacterSet(charactersIn: "&=+#?"))
}
