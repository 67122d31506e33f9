import Synchronization

/// FCM's refusal of subscription calls naming one topic (`TOPICS_SUBSCRIPTION_RATE_EXCEEDED`, in
/// the Admin SDKs' words, since 2026): "the rate of subscription requests to a particular topic is
/// too high". `PUT /api/topics/{topic}/fault` makes the emulator answer so, so that an SDK user can
/// test the back-off: Instance ID `batchAdd`/`batchRemove` answer `RESOURCE_EXHAUSTED` for every
/// token, `rel/topics` and the v1 topicSubscriptions writes a 429 `RESOURCE_EXHAUSTED`. A refused call
/// changes nothing.
public struct TopicFault: Sendable, Hashable {
    /// The one error a topic fault plays, by the Admin SDKs' name for it.
    public static let errorName = "TOPICS_SUBSCRIPTION_RATE_EXCEEDED"

    /// Calls left to refuse; `nil`: until the fault is removed.
    public var remaining: Int?
    /// Seconds the answer's `Retry-After` asks for, on the answers that are errors.
    public var retryAfter: Int?

    public init(remaining: Int?, retryAfter: Int?) {
        self.remaining = remaining
        self.retryAfter = retryAfter
    }
}

/// The topic faults a server process holds: test fixtures, in memory only, like `FaultBoard`.
final class TopicFaultBoard: Sendable {
    private struct Key: Hashable {
        var project: Int64
        var topic: String
    }

    private struct State {
        var faults: [Key: TopicFault] = [:]
        /// Faults per project: subscription calls ask on every call, so it is kept, not counted.
        var perProject: [Int64: Int] = [:]

        mutating func setFault(_ fault: TopicFault?, for key: Key) {
            let had = faults[key] != nil
            faults[key] = fault
            guard had != (fault != nil) else { return }
            perProject[key.project, default: 0] += fault == nil ? -1 : 1
            if perProject[key.project] == 0 { perProject[key.project] = nil }
        }
    }

    private let state = Mutex(State())
    /// Topics with a fault, at most.
    static let capacity = 10_000

    /// - Returns: `false` when the board is full.
    func set(_ fault: TopicFault, topic: String, project: Int64) -> Bool {
        state.withLock { state in
            let key = Key(project: project, topic: topic)
            guard state.faults[key] != nil || state.faults.count < Self.capacity else { return false }
            state.setFault(fault, for: key)
            return true
        }
    }

    /// - Returns: whether there was one.
    func remove(topic: String, project: Int64) -> Bool {
        state.withLock { state in
            let key = Key(project: project, topic: topic)
            guard state.faults[key] != nil else { return false }
            state.setFault(nil, for: key)
            return true
        }
    }

    /// The fault a call naming `topic` meets, counting the call once.
    func take(topic: String, project: Int64) -> TopicFault? {
        state.withLock { state in
            guard state.perProject[project] != nil else { return nil }
            let key = Key(project: project, topic: topic)
            guard var fault = state.faults[key] else { return nil }
            if let remaining = fault.remaining {
                fault.remaining = remaining - 1
                state.setFault(remaining > 1 ? fault : nil, for: key)
            }
            return fault
        }
    }
}

extension RegistryService {
    /// Makes the next subscription calls naming `topic` refused as FCM refuses them when their
    /// rate to that topic is too high.
    /// - Throws: `.invalidTopicName`; `.tooManyFaults` when the process holds as many as it keeps.
    public func injectTopicFault(_ fault: TopicFault, topic: String, in project: Project, by actor: AuditActor?)
        async throws
    {
        try checkTopicName(topic)
        guard topicFaults.set(fault, topic: topic, project: project.rowID) else {
            throw RegistryError.tooManyFaults(limit: TopicFaultBoard.capacity)
        }
        var details = ["error": TopicFault.errorName]
        details["times"] = fault.remaining.map(String.init)
        try await recordAudit(
            audit(.faultInjected, target: "/topics/" + topic, details: details, by: actor, project: project.rowID))
    }

    /// - Returns: whether there was a fault to remove.
    public func removeTopicFault(topic: String, in project: Project, by actor: AuditActor?) async throws -> Bool {
        try checkTopicName(topic)
        guard topicFaults.remove(topic: topic, project: project.rowID) else { return false }
        try await recordAudit(audit(.faultCleared, target: "/topics/" + topic, by: actor, project: project.rowID))
        return true
    }

    /// Refuses a subscription call naming `topic` when the topic has a fault, before anything is written.
    /// - Throws: `.topicSubscriptionRateExceeded`.
    func checkTopicFault(_ topic: String, in project: Project) throws(RegistryError) {
        guard let fault = topicFaults.take(topic: topic, project: project.rowID) else { return }
        throw .topicSubscriptionRateExceeded(retryAfter: fault.retryAfter)
    }
}
