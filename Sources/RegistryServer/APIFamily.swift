/// The API a request came through, which decides how its errors are worded.
enum APIFamily: Sendable {
    /// FCM's legacy endpoints (`/fcm/…`): `{"error":"message"}`.
    case legacy
    /// The Instance ID API (`/iid/…`): `{"error":"CODE"}`.
    case instanceID
    /// Google's v1 APIs (`/v1/…`): `{"error":{"code":…,"message":…,"status":…,"details":[…]}}`.
    case v1
    /// fcm-registry's own endpoints (`/api/…` and the rest): `{"error":{"code":"…","message":"…"}}`.
    case native

    init(path: String) {
        if path.hasPrefix("/fcm/") {
            self = .legacy
        } else if path.hasPrefix("/iid/") {
            self = .instanceID
        } else if path.hasPrefix("/v1/") {
            self = .v1
        } else {
            self = .native
        }
    }
}
