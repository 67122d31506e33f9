import Metrics
import Registry
import Synchronization

/// The relay's counters and gauges.
extension DeliveryWorker {
    /// The send counters, made once each: a counter is looked up by label and dimensions in the
    /// metrics system, which is too slow to do once per delivery.
    static let counters = Mutex<[String: Counter]>([:])

    static func count(_ outcome: String, code: String?, times: Int = 1) {
        guard times > 0 else { return }
        let key = "\(outcome) \(code ?? "")"
        let counter = counters.withLock { counters in
            if let counter = counters[key] { return counter }
            let counter = Counter(
                label: "fcm_registry_relay_sends_total", dimensions: [("outcome", outcome), ("error", code ?? "")])
            counters[key] = counter
            return counter
        }
        counter.increment(by: times)
    }

    /// The queue of each relaying project, as `GET /api/relay` shows it.
    func updateGauges() async {
        guard let relaying = try? await settings.settings() else { return }
        for rowID in relaying.keys {
            guard let project = try? await project(rowID),
                let status = try? await registry.relayStatus(in: project)
            else { continue }
            let dimensions = [("project", project.projectId)]
            Gauge(label: "fcm_registry_relay_pending", dimensions: dimensions).record(status.pending)
            Gauge(label: "fcm_registry_relay_in_flight", dimensions: dimensions).record(status.inFlight)
            Gauge(label: "fcm_registry_relay_delivered", dimensions: dimensions).record(status.delivered)
            Gauge(label: "fcm_registry_relay_failed", dimensions: dimensions).record(status.failed)
            Gauge(label: "fcm_registry_relay_pruned", dimensions: dimensions).record(status.pruned)
            Gauge(label: "fcm_registry_relay_paused", dimensions: dimensions).record(status.pausedUntil == nil ? 0 : 1)
        }
    }
}
