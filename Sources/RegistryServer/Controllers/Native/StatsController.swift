import FCMWire
import Foundation
import Hummingbird
import Registry

/// The project's history a minute at a time, kept by the store for every server: what the console
/// charts, and what a script can read without Prometheus.
struct StatsController {
    let registry: RegistryService

    func addRoutes(to routes: RouteRecorder) {
        routes.on("/api/stats", .get, use: stats)
    }

    struct Minute: Encodable {
        /// The minute's start.
        var at: Date
        var accepted: Int
        var delivered: Int
        var failed: Int
        var pruned: Int
    }

    struct Totals: Encodable {
        var accepted = 0
        var delivered = 0
        var failed = 0
        var pruned = 0
    }

    struct StatsAnswer: ResponseEncodable {
        var window: String
        var from: Date
        var to: Date
        /// Oldest first; a minute without any count is left out.
        var minutes: [Minute]
        var totals: Totals
    }

    /// `GET /api/stats?window=24h`: a window of whole minutes ending with the current one, written
    /// `<n>m` or `<n>h`, from `1m` to `24h` (the default).
    @Sendable func stats(_ request: Request, context: RegistryRequestContext) async throws -> StatsAnswer {
        let project = try context.requireProject()
        let text = request.uri.queryParameters.get("window") ?? "24h"
        guard let minutes = Self.minutes(in: text) else {
            throw BadRequest.statsWindowInvalid
        }
        let rows = try await registry.minuteStats(in: project, window: .seconds(minutes * 60))
        var totals = Totals()
        for row in rows {
            totals.accepted += row.accepted
            totals.delivered += row.delivered
            totals.failed += row.failed
            totals.pruned += row.pruned
        }
        let end = MinuteStats.minute(of: EpochMilliseconds.now()) + 60_000
        return StatsAnswer(
            window: text, from: EpochMilliseconds.date(end - Int64(minutes) * 60_000), to: EpochMilliseconds.date(end),
            minutes: rows.map {
                Minute(
                    at: EpochMilliseconds.date($0.minute), accepted: $0.accepted, delivered: $0.delivered,
                    failed: $0.failed, pruned: $0.pruned)
            }, totals: totals)
    }

    /// `90m` → 90, `24h` → 1440; `nil` outside 1 minute to 24 hours.
    static func minutes(in window: String) -> Int? {
        guard let unit = window.last, let number = Int(window.dropLast()), number > 0 else { return nil }
        let minutes: Int
        switch unit {
        case "m": minutes = number
        case "h": minutes = number <= 24 ? number * 60 : Int.max
        default: return nil
        }
        return minutes <= 24 * 60 ? minutes : nil
    }
}
