@testable import FCMRelay
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
    /// A clock the test moves.
    final class TestClock: Sendable {
        let now = Mutex(Date(timeIntervalSince1970: 1_800_000_000.25))
        func read() -> Date { now.withLock { $0 } }
        func advance(_ seconds: TimeInterval) { now.withLock { $0 += seconds } }
    }

    /// A store with one project.
    func projectInStore() async throws -> (RegistryService, Project, any RegistryBackend) {
        let store = try await TestBackend.makeStore()
        let registry = try await RegistryService(store: store)
        let (project, _) = try await registry.createProject(projectId: "budget", senderId: "444000444000")
        return (registry, project, store)
    }

    @Test func serversOnOneDatabaseShareTheProjectsRate() async throws {
        let (_, created, store) = try await projectInStore()
        let clock = TestClock()
        let one = ProjectBudget(store: store, defaultRate: 100, clock: { clock.read() })
        let two = ProjectBudget(store: store, defaultRate: 100, clock: { clock.read() })
        let project = created.rowID
        // Within one second: each takes in slices, and together they get the rate, no more.
        #expect(await one.take(project, count: 30))
        #expect(await two.take(project, count: 60))
        let taken = Mutex(0)
        let waiter = Task {
            // More than the second has left: it waits for the next second.
            let ok = await one.take(project, count: 20)
            taken.withLock { $0 += 20 }
            return ok
        }
        try await Task.sleep(for: .milliseconds(300))
        #expect(taken.withLock { $0 } == 0)
        // A direct send does not wait: it takes what is left (here nothing) and goes.
        #expect(await two.take(project, count: 5, direct: true))
        clock.advance(1)
        #expect(await waiter.value)
        #expect(taken.withLock { $0 } == 20)
    }

    @Test func aProjectsOwnRateHoldsOverTheDefault() async throws {
        let (registry, project, store) = try await projectInStore()
        try await registry.setSendRate(projectId: project.projectId, rate: 7)
        let budget = ProjectBudget(store: store, defaultRate: 10_000)
        #expect(await budget.rate(of: project.rowID) == 7)
        #expect(await budget.rate(of: project.rowID + 1) == 10_000)
        #expect(try await store.takeSendBudget(project: project.rowID, second: 5, slice: 5, rate: 7) == 5)
        #expect(try await store.takeSendBudget(project: project.rowID, second: 5, slice: 5, rate: 7) == 2)
        #expect(try await store.takeSendBudget(project: project.rowID, second: 5, slice: 5, rate: 7) == 0)
        #expect(try await store.takeSendBudget(project: project.rowID, second: 6, slice: 5, rate: 7) == 5)
    }

    /// A pause one server met and recorded reaches the others: they read it, and their own
    /// requests of the project stop too, without recording it again.
    @Test func aPauseRecordedByOneServerIsTakenByTheOthers() async throws {
        let (_, project, store) = try await projectInStore()
        try await store.setRelay(
            RelaySettings(
                firebaseProjectID: "fb", clientEmail: "sa@fb", privateKeyID: nil, privateKey: "k",
                tokenURI: "https://o/token", upstream: "https://u"), for: project)
        #expect(try await store.pausedProjects(at: Date()).isEmpty)
        let until = Date().addingTimeInterval(30)
        try await store.pause(project: project.rowID, until: until, error: "QUOTA_EXCEEDED")
        let paused = try await store.pausedProjects(at: Date())
        #expect(paused.keys.sorted() == [project.rowID])
        #expect(abs((paused[project.rowID] ?? .distantPast).timeIntervalSince(until)) < 0.01)
        #expect(try await store.pausedProjects(at: until.addingTimeInterval(1)).isEmpty)

        let pacer = ProjectPacer(fullRound: 8)
        pacer.adopt(project.rowID, pausedFor: .seconds(30))
        #expect(pacer.isPaused(project.rowID))
        #expect(pacer.takePauseReport(project.rowID) == nil)  // recorded already, by the server that met it
        #expect(pacer.admit(project.rowID, wanting: 100) == 1)
    }
}
