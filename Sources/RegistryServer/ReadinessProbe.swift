import Hummingbird
import Registry
import Synchronization

/// `GET /readyz`: whether a load balancer should send this server requests. 200 while the
/// database answers and the audience index is current within `--ready-max-lag`; 503 with
/// `Retry-After` and the reasons otherwise. `GET /health` stays liveness: the process serves.
///
/// Probes come from every balancer every few seconds and need no key, so an answer is reused for
/// a second and callers at the same time share one check: a flood of probes costs the database
/// at most one `SELECT 1` a second.
final class ReadinessProbe: Sendable {
    let registry: RegistryService
    let maximumLag: Duration
    static let reuseFor = Duration.seconds(1)

    private let latest = Mutex<(checked: ContinuousClock.Instant, check: Task<Readiness, Never>)?>(nil)

    init(registry: RegistryService, maximumLag: Duration) {
        self.registry = registry
        self.maximumLag = maximumLag
    }

    func response() async -> Response {
        let readiness = await current()
        var response =
            (try? JSONResponse.make(readiness, status: readiness.ready ? .ok : .serviceUnavailable))
            ?? Response(status: .serviceUnavailable)
        if !readiness.ready { response.headers[.retryAfter] = "1" }
        response.headers[.cacheControl] = "no-store"
        return response
    }

    private func current() async -> Readiness {
        let now = ContinuousClock.now
        let check = latest.withLock { latest -> Task<Readiness, Never> in
            if let latest, now - latest.checked < Self.reuseFor { return latest.check }
            let registry = registry
            let maximumLag = maximumLag
            let check = Task { await registry.readiness(maximumLag: maximumLag) }
            latest = (now, check)
            return check
        }
        return await check.value
    }
}
