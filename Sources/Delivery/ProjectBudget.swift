import Foundation
import Registry
import Synchronization

/// A server's share of each project's budget of sends a second (see `SendBudgetStore`): before a
/// round of requests goes, it takes what the round needs from slices leased out of the database's
/// counter for the current second, so that all servers on the database together keep to the
/// project's rate. A slice is a tenth of the rate (or what the round needs, when more), so a lone
/// server reaches the full rate with ten leases a second, and what a server leases and does not
/// use lapses with its second.
final class ProjectBudget: Sendable {
    private struct Held {
        var sends: Int
        /// When the second they were taken from ends, on this server's clock.
        var lapses: ContinuousClock.Instant
    }

    private let store: any SendBudgetStore
    private let defaultRate: Int
    private let held = Mutex<[Int64: Held]>([:])
    private let rates = Mutex<(rates: [Int64: Int], readAt: ContinuousClock.Instant)?>(nil)

    /// Slices leased a second by a server that sends at the full rate.
    static let slicesPerSecond = 10

    init(store: any SendBudgetStore, defaultRate: Int) {
        self.store = store
        self.defaultRate = max(1, defaultRate)
    }

    /// The project's rate: its own (`project relay --rate`, read at most once a second), else
    /// `serve --relay-rate`.
    func rate(of project: Int64) async -> Int {
        if let cached = rates.withLock({ $0 }), ContinuousClock.now - cached.readAt < .seconds(1) {
            return cached.rates[project] ?? defaultRate
        }
        let read = (try? await store.sendRates()) ?? rates.withLock { $0?.rates } ?? [:]
        rates.withLock { $0 = (read, .now) }
        return read[project] ?? defaultRate
    }

    /// Waits until `count` sends of `project` fit in its budget, and takes them. A direct send
    /// (someone waits for its answer) never waits: what the second has not left, it takes past
    /// the rate, and the fan-outs after it wait the longer.
    /// - Returns: `false` when cancelled before the budget was there (nothing may be sent).
    func take(_ project: Int64, count: Int, direct: Bool = false) async -> Bool {
        var needed = count
        while needed > 0 {
            if Task.isCancelled { return false }
            needed -= takeHeld(project, upTo: needed)
            guard needed > 0 else { return true }
            let rate = await rate(of: project)
            let slice: SendBudgetSlice
            do {
                slice = try await store.takeSendBudget(
                    project: project, slice: direct ? needed : min(rate, max(needed, rate / Self.slicesPerSecond)),
                    rate: rate, overdraw: direct)
            } catch {
                // The database is out of reach: nothing sent now could be recorded either.
                try? await Task.sleep(for: .milliseconds(500))
                continue
            }
            let lapses = ContinuousClock.now + .milliseconds(Int(slice.secondEndsIn * 1000))
            guard slice.granted > 0 else {
                // The second's budget is spent: the next second's.
                try? await Task.sleep(until: lapses + .milliseconds(1))
                continue
            }
            held.withLock { held in
                let before = held[project].flatMap { $0.lapses > .now ? $0.sends : nil } ?? 0
                held[project] = Held(sends: before + slice.granted, lapses: lapses)
            }
        }
        return true
    }

    /// Takes up to `wanted` of the sends this server holds for the project's current second.
    private func takeHeld(_ project: Int64, upTo wanted: Int) -> Int {
        held.withLock { held in
            guard var mine = held[project], mine.lapses > .now, mine.sends > 0 else { return 0 }
            let taken = min(wanted, mine.sends)
            mine.sends -= taken
            held[project] = mine
            return taken
        }
    }
}
