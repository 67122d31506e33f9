@testable import Delivery
import FCMRelay
import Foundation
import Registry
import Synchronization
import TestBackends
import Testing

/// Each project's budget of sends a second, shared by the servers on one database: together they
/// never take more than the rate in a second, a lone server takes all of it, and a direct send
/// never waits for the next second.
@Suite(.onEveryBackend)
struct ProjectBudgetTests {
    /// A store with one project.
    func projectInStore() async throws -> (RegistryService, Project, any RegistryBackend) {
        let store = try await TestBackend.makeStore()
        let registry = try await RegistryService(store: store)
        let (project, _) = try await registry.createProject(projectId: "budget", senderId: "444000444000")
        return (registry, project, store)
    }

    /// Slices taken one after another until one comes back empty, by second: a second whose
    /// budget ran out gave exactly the rate, and none gave more.
    @Test func slicesNeverPassTheRateInASecond() async throws {
        let (_, project, store) = try await projectInStore()
        var bySecond: [Int64: Int] = [:]
        var spent: Int64?
        for _ in 0..<1000 where spent == nil {
            let slice = try await store.takeSendBudget(project: project.rowID, slice: 7, rate: 50, overdraw: false)
            bySecond[slice.second, default: 0] += slice.granted
            #expect(slice.secondEndsIn > 0 && slice.secondEndsIn <= 1)
            if slice.granted == 0 { spent = slice.second }
        }
        let second = try #require(spent)
        #expect(bySecond[second] == 50)
        #expect(bySecond.values.allSatisfy { $0 <= 50 })
        // A direct send overdraws the spent second, and is counted: nothing is left after it.
        let direct = try await store.takeSendBudget(project: project.rowID, slice: 3, rate: 50, overdraw: true)
        #expect(direct.granted == 3)
        let after = try await store.takeSendBudget(project: project.rowID, slice: 7, rate: 50, overdraw: false)
        // (Only when all three fell in one second: a loaded machine may cross into the next.)
        if direct.second == second, after.second == second { #expect(after.granted == 0) }
    }

    /// Two servers' budgets over one database, sending as fast as their budget lets them for a
    /// while: together they never get more than the rate in a second (the slices are counted by
    /// the database), and each gets some.
    @Test func serversOnOneDatabaseShareTheProjectsRate() async throws {
        let (_, project, store) = try await projectInStore()
        let one = ProjectBudget(store: store, defaultRate: 40)
        let two = ProjectBudget(store: store, defaultRate: 40)
        let started = ContinuousClock.now
        async let first = Self.sends(through: one, of: project.rowID, until: started + .milliseconds(1900))
        async let second = Self.sends(through: two, of: project.rowID, until: started + .milliseconds(1900))
        let (a, b) = await (first, second)
        // Under two seconds touch at most three seconds of budget.
        #expect(a + b <= 3 * 40)
        // And neither server is shut out: one a loaded machine left unscheduled in those two
        // seconds still gets its share after them.
        for (budget, sent) in [(one, a), (two, b)] where sent == 0 {
            #expect(await Self.sends(through: budget, of: project.rowID, until: .now + .seconds(10)) > 0)
        }
    }

    /// Takes the budget four sends at a time until `end`; how many it took.
    static func sends(through budget: ProjectBudget, of project: Int64, until end: ContinuousClock.Instant) async -> Int {
        var sent = 0
        while ContinuousClock.now < end {
            guard await budget.take(project, count: 4) else { break }
            if ContinuousClock.now < end { sent += 4 }
        }
        return sent
    }

    @Test func aProjectsOwnRateHoldsOverTheDefault() async throws {
        let (registry, project, store) = try await projectInStore()
        try await registry.setSendRate(projectId: project.projectId, rate: 7)
        let budget = ProjectBudget(store: store, defaultRate: 10_000)
        #expect(await budget.rate(of: project.rowID) == 7)
        #expect(await budget.rate(of: project.rowID + 1) == 10_000)
    }

    /// A pause one server met and recorded reaches the others: they read it, and their own
    /// requests of the project stop too, without recording it again.
    @Test func aPauseRecordedByOneServerIsTakenByTheOthers() async throws {
        let (_, project, store) = try await projectInStore()
        try await store.setRelay(
            RelayRulesTests.settings.stored, for: project)
        #expect(try await store.pausedProjects(at: Date()).isEmpty)
        let until = Date().addingTimeInterval(30)
        try await store.pause(project: project.rowID, until: until, error: "QUOTA_EXCEEDED")
        let paused = try await store.pausedProjects(at: Date())
        #expect(paused.keys.sorted() == [project.rowID])
        #expect(abs((paused[project.rowID] ?? .distantPast).timeIntervalSince(until)) < 0.01)
        #expect(try await store.pausedProjects(at: until.addingTimeInterval(1)).isEmpty)

        let pacer = ProjectPacer(fullRound: 8)
        pacer.pause(project.rowID, for: .seconds(30), recorded: true)
        #expect(pacer.isPaused(project.rowID))
        #expect(pacer.takePauseReport(project.rowID) == nil)  // recorded already, by the server that met it
        #expect(pacer.admit(project.rowID, wanting: 100) == 1)
    }
}
