import Metrics

/// Why the server closed a connection its client had not closed, counted in
/// `fcm_registry_connections_closed_total{reason}`: under attack, these counts are exact where the
/// log lines (see ``LogThrottle``) are not.
enum ClosedBecause: String, Sendable {
    /// No request head within the header timeout.
    case headerTimeout = "header_timeout"
    /// No whole body within the body timeout.
    case bodyTimeout = "body_timeout"
    /// Silent, near the connection limit, while a new connection came in.
    case makingRoom = "making_room"
    /// Answered before its body was read (401, 404, 413): closed rather than drained.
    case answeredEarly = "answered_early"

    /// Adds one to the reason's count.
    func count() {
        Counter(label: "fcm_registry_connections_closed_total", dimensions: [("reason", rawValue)]).increment()
    }
}
