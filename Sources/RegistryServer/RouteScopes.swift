import Hummingbird
import Registry

/// The scope each route needs: the one table of it, which `RouteRecorder` checks on every
/// request and `docs/http-api.md` prints. Every recorded route has exactly one entry (a test
/// fails on a route added without one); `nil` marks the routes served without a key, and
/// `GET /api/keys/current`, which any key may call. A route missing here needs `admin`.
enum RouteScopes {
    static let table: [(method: HTTPRequest.Method, path: String, scope: KeyScope?)] = [
        // Served without a key.
        (.get, "/health", nil), (.get, "/readyz", nil), (.get, "/openapi.json", nil), (.get, "/metrics", nil),
        (.post, "/token", nil), (.get, "/console", nil), (.get, "/console/:file", nil),
        // FCM's device groups: create, add and remove are one route.
        (.post, "/fcm/notification", .subscribe), (.get, "/fcm/notification", .read),
        // Instance ID.
        (.post, "/iid/v1:batchAdd", .subscribe), (.post, "/iid/v1:batchRemove", .subscribe),
        (.post, "/iid/v1/:token/rel/topics/:topic", .subscribe), (.get, "/iid/info/:token", .read),
        // FCM's topic subscriptions (v1).
        (.post, "/v1/projects/:project/registrations/:token/topicSubscriptions", .subscribe),
        (.get, "/v1/projects/:project/registrations/:token/topicSubscriptions", .read),
        (.get, "/v1/projects/:project/registrations/:token/topicSubscriptions/:topic", .read),
        (.delete, "/v1/projects/:project/registrations/:token/topicSubscriptions/:topic", .subscribe),
        (.patch, "/v1/projects/:project/registrations/:token/topicSubscriptions/:topic", .subscribe),
        // Sends.
        (.post, "/fcm/send", .send), (.post, "/v1/projects/:project/messages:send", .send),
        (.get, "/v1/projects/:project/serviceAccounts/:account/allowedLocations", .read),
        // Tokens.
        (.get, "/api/tokens", .read), (.get, "/api/tokens/:token", .read), (.put, "/api/tokens/:token", .subscribe),
        (.delete, "/api/tokens/:token", .admin), (.put, "/api/tokens/:token/topics", .subscribe),
        (.post, "/api/tokens/{token}:rekey", .subscribe), (.post, "/api/tokens:rekey", .subscribe),
        (.post, "/api/tokens:batchUpdate", .subscribe), (.get, "/api/tokens:freshness", .read),
        (.get, "/api/tokens/:token/messages", .read), (.post, "/api/tokens/:token/upstream", .send),
        // Audiences and inspection.
        (.post, "/api/audiences:resolve", .read), (.post, "/api/conditions:check", .read),
        (.get, "/api/project", .read), (.patch, "/api/project", .admin), (.get, "/api/groups", .read), (.get, "/api/groups/:name", .read),
        (.get, "/api/topics", .read), (.get, "/api/topics/:name", .read), (.get, "/api/stats", .read),
        // Messages and their delivery.
        (.post, "/api/messages:validate", .send), (.get, "/api/messages", .read), (.get, "/api/messages/:id", .read),
        (.get, "/api/messages/:id/deliveries", .read), (.post, "/api/messages/{id}:cancel", .send),
        (.get, "/api/relay", .read),
        // XMPP sessions.
        (.get, "/api/xmpp/connections", .read), (.post, "/api/xmpp/connections:drain", .admin),
        // Faults.
        (.put, "/api/tokens/:token/fault", .admin), (.delete, "/api/tokens/:token/fault", .admin),
        (.put, "/api/fault", .admin), (.delete, "/api/fault", .admin),
        (.put, "/api/topics/:name/fault", .admin), (.delete, "/api/topics/:name/fault", .admin),
        // Webhooks.
        (.post, "/api/webhooks", .admin), (.get, "/api/webhooks", .read), (.get, "/api/webhooks/:id", .read),
        (.delete, "/api/webhooks/:id", .admin), (.post, "/api/webhooks/{id}:rotateSecret", .admin),
        (.post, "/api/webhooks/{id}:enable", .admin), (.post, "/api/webhooks/{id}:retry", .admin),
        // Keys.
        (.get, "/api/keys", .admin), (.post, "/api/keys", .admin), (.delete, "/api/keys/:id", .admin),
        (.post, "/api/keys/{id}:rotate", .admin),
        // The audit log, and the request's own key (any scope: the console asks it what to show).
        (.get, "/api/audit", .read), (.get, "/api/keys/current", nil),
    ]

    private static let byRoute: [String: KeyScope?] = Dictionary(
        table.map { ("\($0.method.rawValue) \($0.path)", $0.scope) }, uniquingKeysWith: { first, _ in first })

    /// The scope `method` on the path template `path` needs behind `AuthMiddleware`; `nil` when any
    /// key may call it; `admin` for a route not in the table.
    static func required(_ method: HTTPRequest.Method, _ path: String) -> KeyScope? {
        byRoute["\(method.rawValue) \(path)"] ?? .admin
    }

    /// The refusal of a request outside its key's scopes: 403 in the envelope of the API called.
    static func refusal(_ family: APIFamily, needs scope: KeyScope) -> APIError {
        ErrorEnvelope.forbidden(
            family,
            family == .v1
                ? "The caller does not have permission: this key lacks the \(scope.rawValue) scope this request needs"
                : "this key lacks the \(scope.rawValue) scope this request needs")
    }
}
