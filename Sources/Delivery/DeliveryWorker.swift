import Foundation
import Logging
import Metrics
import Registry
import ServiceLifecycle
import Synchronization

/// The delivery engine: drains the outbox through a channel (`DeliveryChannel`; FCM HTTP v1 is
/// the first). It claims jobs (with a lease, so that two servers never work the same one), reads
/// their pages, keeps each project within its budget and quota, has the channel send each round,
/// records the outcomes as they arrive (in slices, with the cursor: `PageInFlight`), prunes the
/// tokens the channel says are gone, and retries what may be retried.
///
/// On SIGTERM it claims nothing more, lets each job finish the page in flight and record it, and
/// gives the job back: a restart goes on where it stopped, without duplicates. A page still out
/// half the shutdown deadline later (an upstream that never answers) has its requests ended there:
/// what was answered is recorded, the rest stays pending for the next start, and the server
/// stops within its deadline. Cancelled (the deadline passed), it ends every job at once. After `kill -9`,
/// the jobs' leases expire (or the server, started again under its name, takes them back) and
/// what was sent and not recorded is sent again: at least once, and duplicates bounded by the
/// requests in flight and the slice being written.
public final class DeliveryWorker: Service, Sendable {
    let registry: RegistryService
    let options: RelayOptions
    let handoff: RelayHandoff
    let logger: Logger
    /// The channels this server delivers through, by name.
    let channels: ChannelRegistry
    /// The server's own channel (the first registered): it words what a job for a channel this
    /// server does not hold needs worded.
    let ownChannel: any DeliveryChannel
    let pacer: ProjectPacer
    let budget: ProjectBudget
    let settings: RelaySettingsCache
    /// The jobs being worked, by id.
    let active = Mutex<[Int64: (job: OutboxJob, task: Task<Void, Never>)]>([:])
    let stopping = Atomic<Bool>(false)
    /// Fired once a stopping server's pages in flight have had their time: their requests end.
    let sendsStop = StopSignal()
    /// How long the server may take to stop, from SIGTERM (`--shutdown-deadline`).
    let shutdownDeadline: Duration
    let projects = Mutex<[Int64: Project]>([:])
    /// Fan-outs worked at once; each sends up to `options.concurrency` requests at a time.
    static let jobsAtOnce = 4
    /// Fan-outs of one project worked at once: they share the project's rate, so more would
    /// only keep other projects waiting.
    static let jobsPerProject = jobsAtOnce / 2
    /// How long a fan-out is worked before it goes back to the outbox, behind those waiting.
    static let turn: Duration = .seconds(5)

    public init(
        registry: RegistryService, channels: ChannelRegistry, options: RelayOptions, handoff: RelayHandoff,
        logger: Logger, shutdownDeadline: Duration = .seconds(10)
    ) {
        guard let own = channels.first else { preconditionFailure("a delivery worker without a channel") }
        self.shutdownDeadline = shutdownDeadline
        self.registry = registry
        self.channels = channels
        ownChannel = own
        self.options = options
        self.handoff = handoff
        self.logger = logger
        pacer = ProjectPacer(fullRound: options.pageSize)
        budget = ProjectBudget(store: registry.sendBudget, defaultRate: options.ratePerSecond)
        settings = RelaySettingsCache(outbox: registry.outbox)
    }

    public func run() async throws {
        // Claims this server held when it last stopped without giving them back (`kill -9`, a
        // crash): taken back at once rather than after their lease, when it keeps its name.
        if handoff.keepsItsName {
            do {
                try await registry.outbox.releaseAll(claimedBy: handoff.serverID)
            } catch {
                logger.warning("relay: cannot take back this server's earlier claims", metadata: ["error": "\(error)"])
            }
        }
        handoff.attach { [self] job in start(job) }
        let stopTimer = Mutex<Task<Void, Never>?>(nil)
        await withGracefulShutdownHandler {
            var lastGauges = ContinuousClock.now - .seconds(60)
            var lastPauses = ContinuousClock.now - .seconds(60)
            while !stopping.load(ordering: .relaxed) && !Task.isCancelled {
                if ContinuousClock.now - lastPauses >= .milliseconds(500) {
                    await adoptOtherServersPauses()
                    lastPauses = .now
                }
                await claimWork()
                if ContinuousClock.now - lastGauges >= .seconds(5) {
                    await updateGauges()
                    lastGauges = .now
                }
                await handoff.waitForWork(options.pollInterval)
            }
        } onGracefulShutdown: { [self] in
            stopping.store(true, ordering: .relaxed)
            handoff.wake()
            // The group stops its peers one after another, all within the deadline: the pages
            // in flight take half of it at most.
            let grace = shutdownDeadline / 2
            stopTimer.withLock { timer in
                timer = Task { [sendsStop] in
                    try? await Task.sleep(for: grace)
                    sendsStop.fire()
                }
            }
        }
        handoff.detach()
        await withTaskCancellationHandler {
            for working in active.withLock({ Array($0.values) }) { await working.task.value }
        } onCancel: { [self] in
            // Past the deadline: every job ends now, its requests with it.
            sendsStop.fire()
            for working in active.withLock({ Array($0.values) }) { working.task.cancel() }
        }
        stopTimer.withLock { $0?.cancel() }
        for channel in channels.channels { await channel.shutdown() }
    }

    /// A quota pause another server met stops this server's requests of the project as well,
    /// within half a second, not only its next claims.
    func adoptOtherServersPauses() async {
        // A server whose projects do not relay (an emulator) reads nothing for it.
        guard (try? await settings.settings().isEmpty) == false,
            let paused = try? await registry.sendBudget.pausedProjects(at: Date()) else { return }
        for (project, until) in paused {
            pacer.pause(project, for: .milliseconds(Int(max(0, until.timeIntervalSinceNow) * 1000)), recorded: true)
        }
    }

    /// Claims what this server has room for, one job at a time, so that no project takes more
    /// than its share: at most `jobsAtOnce / 2` of a server's fan-outs are one project's, and
    /// another project's send finds a place at the next look. A direct send taken by this server
    /// is worked at once, beside the fan-outs, and never waits for a place.
    func claimWork() async {
        do {
            // A server whose projects do not relay (an emulator) writes nothing to look.
            guard try await !settings.settings().isEmpty else { return }
            while !stopping.load(ordering: .relaxed) {
                let (room, full) = active.withLock { working in
                    var perProject: [Int64: Int] = [:]
                    for (job, _) in working.values where !job.isDirect { perProject[job.project, default: 0] += 1 }
                    let busy = perProject.values.reduce(0, +)
                    return (Self.jobsAtOnce - busy, Set(perProject.filter { $0.value >= Self.jobsPerProject }.keys))
                }
                guard room > 0 else { return }
                let jobs = try await registry.outbox.claim(
                    handoff.serverID, leaseUntil: leaseEnd(), now: Date(), limit: 1, skipping: full)
                guard !jobs.isEmpty else { return }
                for job in jobs { start(job) }
            }
        } catch {
            logger.warning("relay: cannot claim outbox work", metadata: ["error": "\(error)"])
        }
    }

    /// Works `job` in a task of its own, once.
    func start(_ job: OutboxJob) {
        active.withLock { working in
            guard working[job.id] == nil else { return }
            working[job.id] = (job, Task { [self] in
                await work(job)
                active.withLock { _ = $0.removeValue(forKey: job.id) }
                handoff.finished(job.id)
                handoff.wake()
            })
        }
    }

    /// Recipients a page reads: a page, or fewer while the slow start after a pause holds the
    /// project to fewer, and at most half the project's rate, so that a round is sent within the
    /// second whose budget it took.
    func roundSize(of job: OutboxJob) async -> Int {
        pacer.admit(job.project, wanting: min(options.pageSize, max(1, await budget.rate(of: job.project) / 2)))
    }

    func leaseEnd() -> Date {
        Date().addingTimeInterval(options.lease.seconds)
    }

    func project(_ rowID: Int64) async throws -> Project? {
        if let project = projects.withLock({ $0[rowID] }) { return project }
        let all = try await registry.projects()
        projects.withLock { cache in
            for project in all { cache[project.rowID] = project }
        }
        return all.first { $0.rowID == rowID }
    }
}
