import Foundation

/// Delivery through FCM HTTP v1: turning it on and off, what the relay does to the registry when
/// FCM answers, and what users see of it.
extension RegistryService {
    /// Turns delivery on for `projectId` through a channel, with settings the channel checked
    /// (for FCM HTTP v1, those of a service-account file), or changes them. Audited as
    /// `relay.enabled`.
    /// - Throws: `.projectNotFound`.
    public func setRelay(projectId: String, _ settings: ChannelSettings, by actor: AuditActor = .commandLine)
        async throws
    {
        let project = try await project(named: projectId)
        try await outbox.setRelay(
            settings, for: project,
            audit: audit(
                .relayEnabled, target: project.projectId, details: Self.shownSettings(settings), by: actor,
                project: project.rowID))
    }

    /// What an audit entry says of a channel's settings: its name and the settings that may be
    /// shown (strings only); never its secrets.
    static func shownSettings(_ settings: ChannelSettings) -> [String: String] {
        var shown = ["channel": settings.channel]
        for (name, value) in settings.settings {
            if let text = value.string { shown[name] = text }
        }
        return shown
    }

    /// Gives the project a rate toward FCM of its own (within `SendRate.range`), held by all
    /// servers on the database together; `nil` leaves it to `serve --relay-rate`.
    public func setSendRate(projectId: String, rate: Int?) async throws {
        precondition(rate.map(SendRate.range.contains) ?? true, "a rate outside SendRate.range")
        try await sendBudget.setSendRate(rate, for: try await project(named: projectId))
    }

    /// The project's own rate toward FCM; `nil` when it has none (`serve --relay-rate` holds).
    public func sendRate(of project: Project) async throws -> Int? {
        try await sendBudget.sendRates()[project.rowID]
    }

    /// Turns delivery off: what is still pending fails with `RELAY_OFF`. Audited as `relay.disabled`.
    public func turnRelayOff(projectId: String, by actor: AuditActor = .commandLine) async throws {
        let project = try await project(named: projectId)
        try await outbox.setRelay(
            nil, for: project,
            audit: audit(.relayDisabled, target: project.projectId, by: actor, project: project.rowID))
    }

    /// How `project`'s messages leave this server: through the relay, or into the log only.
    public func delivery(of project: Project) async throws -> ProjectDelivery {
        try await sink.relays(project) ? .relayed : .recorded
    }

    /// The projects without a relay, read from the store (not the sink's cache): those whose
    /// messages reach no device.
    public func projectsOnlyRecording() async throws -> [Project] {
        let relaying = try await outbox.relaySettings()
        return try await projects().filter { relaying[$0.rowID] == nil }
    }

    /// The project's relay settings, `nil` when it does not relay.
    public func relaySettings(of project: Project) async throws -> ChannelSettings? {
        try await outbox.relaySettings()[project.rowID]
    }

    private func project(named projectId: String) async throws -> Project {
        guard let project = try await projects().first(where: { $0.projectId == projectId }) else {
            throw RegistryError.projectNotFound(projectId)
        }
        return project
    }

    // MARK: - FCM's verdicts, applied to the registry

    /// FCM said the token is gone for this sender: it is unregistered, so it leaves its groups and
    /// topics (through the change feed, on every server) and a later send does not reach it.
    public func prune(_ token: String, in project: Project) async throws {
        guard RegistrationToken.isWellFormed(token) else { return }
        if try await store.token(token, in: project)?.state == .registered {
            _ = applied(try await store.unregisterToken(token, in: project, audit: nil))
            try await outbox.countPruned(project: project.rowID, tokens: 1)
        }
    }

    /// FCM took a message for a token the registry had never seen (or had unregistered): with the
    /// relay on, FCM is the judge of a token, so it is registered now.
    public func adopt(_ token: String, in project: Project) async throws {
        guard RegistrationToken.isWellFormed(token) else { return }
        if try await store.token(token, in: project)?.state != .registered {
            _ = applied(try await store.registerToken(token, in: project))
        }
    }

    // MARK: - What users see

    /// A logged message's delivery counts; `nil` when it was not relayed.
    public func delivery(ofMessage id: String, in project: Project) async throws -> DeliveryCounts? {
        try await outbox.delivery(ofMessage: id, in: project)
    }

    /// Stops what has not been sent of a relayed message (see `OutboxStore.cancel`).
    /// - Returns: its counts once cancelled; `nil` when the message was not relayed.
    /// - Throws: `RegistryError.messageFinished` when nothing is left to cancel.
    /// Audited as `message.cancelled` when `actor` says who asked.
    public func cancel(message id: String, in project: Project, by actor: AuditActor? = nil) async throws
        -> DeliveryCounts?
    {
        let audit = audit(.messageCancelled, target: id, by: actor, project: project.rowID)
        return try await outbox.cancel(message: id, in: project, now: Date(), audit: audit)
    }

    /// A relayed message's recipients in `state`; `nil` when the message was not relayed.
    public func deliveries(ofMessage id: String, state: DeliveryState, in project: Project, page: PageRequest)
        async throws -> Page<DeliveryEntry>?
    {
        let after = try page.position(in: .deliveries).map { position -> Int64 in
            guard let value = Int64(position), value >= 0 else { throw RegistryError.invalidPageToken }
            return value
        }
        return try await outbox.deliveries(
            ofMessage: id, in: project, state: state, after: after, limit: page.size(default: 100, maximum: 1000))
    }

    /// The project's relay, `nil` when it does not relay.
    public func relayStatus(in project: Project) async throws -> RelayStatus? {
        try await outbox.relayStatus(of: project)
    }
}

/// How a project's accepted messages leave the server.
public enum ProjectDelivery: String, Sendable {
    /// Delivered to devices through FCM HTTP v1 (`project relay`).
    case relayed
    /// Kept in the message log only: an emulator for tests, or a project whose relay is not set
    /// up yet. Nothing reaches a device.
    case recorded
}
