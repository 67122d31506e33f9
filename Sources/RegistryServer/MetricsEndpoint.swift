import Hummingbird
import Prometheus
import Registry
import Synchronization

/// The server's own metrics, written straight into the registry `GET /metrics` shows (the
/// swift-metrics facade, which `serve` also points at it, carries what the store records, such as
/// group-commit batch sizes).
struct ServerMetrics: Sendable {
    let registry: PrometheusCollectorRegistry
    /// The request series already made, so that a request costs one dictionary look-up rather
    /// than the registry's name and label checks.
    private let series = RequestSeries()

    init(registry: PrometheusCollectorRegistry) {
        self.registry = registry
    }

    private static let latencyBuckets: [Duration] = [
        .microseconds(250), .milliseconds(1), .milliseconds(2.5), .milliseconds(5), .milliseconds(10),
        .milliseconds(25), .milliseconds(50), .milliseconds(100), .milliseconds(250), .seconds(1), .seconds(5),
    ]

    func request(method: String, route: String, status: Int, duration: Duration) {
        let key = RequestSeries.Key(method: method, route: route, status: status)
        if let (counter, histogram) = series.lookUp(key) {
            counter.increment()
            histogram.record(duration)
            return
        }
        let counter = registry.makeCounter(
            descriptor: .init(
                namespace: "fcm_registry", metricName: "http_requests", unitName: "total",
                helpText: "HTTP requests by method, route and status."),
            labels: [("method", method), ("route", route), ("status", String(status))])
        let histogram = registry.makeDurationHistogram(
            descriptor: .init(
                namespace: "fcm_registry", metricName: "http_request_duration", unitName: "seconds",
                helpText: "Time from a request's head to its answer, by route."),
            labels: [("route", route)], buckets: Self.latencyBuckets)
        series.store((counter, histogram), for: key)
        counter.increment()
        histogram.record(duration)
    }

    func gauge(_ name: String, _ help: String, _ value: Int, labels: [(String, String)] = []) {
        gauge(name, help, Double(value), labels: labels)
    }

    func gauge(_ name: String, _ help: String, _ value: Double, labels: [(String, String)] = []) {
        registry.makeGauge(
            descriptor: .init(namespace: "fcm_registry", metricName: name, unitName: "", helpText: help),
            labels: labels
        ).set(value)
    }
}

/// Request metric handles by method, route and status. Routes are templates, so the set is small.
final class RequestSeries: Sendable {
    struct Key: Hashable, Sendable {
        var method: String
        var route: String
        var status: Int
    }

    private let handles = Mutex<[Key: (Counter, DurationHistogram)]>([:])

    func lookUp(_ key: Key) -> (Counter, DurationHistogram)? {
        handles.withLock { $0[key] }
    }

    func store(_ handle: (Counter, DurationHistogram), for key: Key) {
        handles.withLock { $0[key] = handle }
    }
}

/// `GET /metrics` in Prometheus' text format. Request counts and latencies are recorded as they
/// happen; the gauges of state (index size, feed lag, message log per project) are read when
/// scraped.
enum MetricsEndpoint {
    static func response(registry: RegistryService, metrics: ServerMetrics, sessions: any AppServerSessions)
        async throws -> Response
    {
        let size = registry.audienceSize()
        metrics.gauge("audience_subscriptions", "Subscriptions held by this process's audience index.", size.subscriptions)
        metrics.gauge("audience_registered_tokens", "Registered tokens in the audience index.", size.registered)
        metrics.gauge("audience_bytes", "Heap bytes the audience index holds, estimated.", size.bytes)
        metrics.gauge("feed_position", "The last change-feed entry this process applied.", Int(size.position))
        metrics.gauge(
            "feed_lag_seconds", "Time since this process's audience index was last current with the change feed.",
            RegistryService.seconds(registry.feedHealth.lag()))
        // What needs the database is left at its last value while the database is out of reach:
        // the scrape itself still answers, with the lag that says so.
        if let lag = try? await registry.feedLag() {
            metrics.gauge("feed_lag_entries", "Committed change-feed entries this process has not applied yet.", Int(lag))
        }
        if let usages = try? await registry.messageLogUsage() {
            for (project, usage) in usages {
                metrics.gauge("message_log_entries", "Entries in a project's message log.", usage.entries, labels: [("project", project)])
                metrics.gauge("message_log_bytes", "Bytes in a project's message log.", usage.bytes, labels: [("project", project)])
            }
        }
        metrics.gauge("xmpp_sessions", "Authenticated XMPP sessions.", sessions.sessionCount)
        if let waiting = try? await registry.waitingUpstream(in: nil) {
            metrics.gauge("xmpp_upstream_waiting", "Upstream messages waiting for an XMPP session, in all projects.", waiting)
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(16 * 1024)
        metrics.registry.emit(into: &bytes)
        return Response(
            status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}
