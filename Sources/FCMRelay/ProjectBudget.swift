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
        var second: Int64
        var sends: Int
    }

    private let store: any SendBudgetStore
    private let defaultRate: Int
    private let held = Mutex<[Int64: Held]>([:])
    private let rates = Mutex<(rates: [Int64: Int], readAt: ContinuousClock.Instant)?>(nil)
    private let clock: @Sendable () -> Date

    /// Slices leased a second by a server that sends at the full rate.
    static let slicesPerSecond = 10

    init(store: any SendBudgetStore, defaultRate: Int, clock: @escaping @Sendable () -> Date = Date.init) {
        self.store = store
        self.defaultRate = max(1, defaultRate)
        self.clock = clock
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
    /// (someone waits for its answer) takes what the second has left and never waits: it is
    /// small, and counted all the same.
    /// - Returns: `false` when cancelled before the budget was there (nothing may be sent).
    func take(_ project: Int64, count: Int, direct: Bool = false) async -> Bool {
        var needed = count
        while needed > 0 {
            if Task.isCancelled { return false }
            let second = Int64(clock().timeIntervalSince1970.rounded(.down))
            needed -= takeHeld(project, second: second, upTo: needed)
            guard needed > 0 else { return true }
            let rate = await rate(of: project)
            let slice = min(rate, max(needed, rate / Self.slicesPerSecond))
            let granted: Int
            do {
                granted = try await store.takeSendBudget(project: project, second: second, slice: slice, rate: rate)
            } catch {
                // The database is out of reach: nothing sent now could be recorded either.
                try? await Task.sleep(for: .milliseconds(500))
                continue
            }
            if granted > 0 {
                held.withLock { held in
                    let before = held[project].flatMap { $0.second == second ? $0.sends : nil } ?? 0
                    held[project] = Held(second: second, sends: before + granted)
                }
                continue
            }
            if direct { return true }
            // The second's budget is spent: the next second's.
            let untilNext = Double(second + 1) - clock().timeIntervalSince1970
            try? await Task.sleep(for: .milliseconds(Int(max(0.001, untilNext) * 1000) + 1))
        }
        return true
    }

    /// Takes up to `wanted` of the sends this server holds for `second`.
    private func takeHeld(_ project: Int64, second: Int64, upTo wanted: Int) -> Int {
        held.withLock { held in
            guard var mine = held[project], mine.second == second, mine.sends > 0 else { return 0 }
            let taken = min(wanted, mine.sends)
            mine.sends -= taken
            held[project] = mine
            return taken
        }
    }
}
