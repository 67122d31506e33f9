import Hummingbird
import Metrics
import Prometheus
import Registry

/// `GET /metrics` in Prometheus' text format. Request counts and latencies, group-commit batch
/// sizes and the like are recorded as they happen; the gauges of state (index size, feed lag,
/// message log per project) are read when scraped.
enum MetricsEndpoint {
    static func response(registry: RegistryService, metrics: PrometheusCollectorRegistry) async throws -> Response {
        let size = registry.audience.size()
        Gauge(label: "fcm_registry_audience_subscriptions").record(size.subscriptions)
        Gauge(label: "fcm_registry_audience_registered_tokens").record(size.registered)
        Gauge(label: "fcm_registry_audience_bytes").record(size.bytes)
        Gauge(label: "fcm_registry_feed_position").record(registry.audience.position)
        Gauge(label: "fcm_registry_feed_lag_entries").record(try await registry.feedLag())
        for (project, usage) in try await registry.messageLogUsage() {
            Gauge(label: "fcm_registry_message_log_entries", dimensions: [("project", project)]).record(usage.entries)
            Gauge(label: "fcm_registry_message_log_bytes", dimensions: [("project", project)]).record(usage.bytes)
        }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(16 * 1024)
        metrics.emit(into: &bytes)
        return Response(
            status: .ok, headers: [.contentType: "text/plain; version=0.0.4; charset=utf-8"],
            body: .init(byteBuffer: ByteBuffer(bytes: bytes)))
    }
}
