/// What `fcm-registry copy` moves store to store after the records, because no export file
/// carries a secret: each project's relay settings and own rate, its mirror settings and its
/// webhooks, onto the project of the same id in the target.
public enum ProjectSettingsCopy {
    /// What a copy wrote, and the webhooks it left out.
    public struct Tally: Sendable, Hashable {
        /// Projects that relay, and that mirror, in the target now.
        public var relays = 0
        public var mirrors = 0
        /// Webhooks added, or brought up to date where a copy before had added them.
        public var webhooks = 0
        /// Webhooks not written, and why.
        public var skipped: [SkippedWebhook] = []
    }

    /// A webhook a copy did not write: its id, its project's, and why.
    public struct SkippedWebhook: Sendable, Hashable {
        public var webhook: String
        public var project: String
        public var outcome: WebhookCopyOutcome
    }

    /// Copies every project's settings that `target` has a project for (by `projectId`).
    public static func copy(from source: any RegistryBackend, to target: any RegistryBackend) async throws -> Tally {
        let relays = try await source.relaySettings()
        let rates = try await source.sendRates()
        let targetProjects = Dictionary(uniqueKeysWithValues: try await target.projects().map { ($0.projectId, $0) })
        var tally = Tally()
        for sourceProject in try await source.projects() {
            guard let project = targetProjects[sourceProject.projectId] else { continue }
            if let relay = relays[sourceProject.rowID] {
                try await target.setRelay(relay, for: project)
                tally.relays += 1
            }
            if let rate = rates[sourceProject.rowID] { try await target.setSendRate(rate, for: project) }
            if let mirror = try await source.mirrorSettings(of: sourceProject) {
                try await target.setMirrorSettings(mirror, for: project)
                tally.mirrors += 1
            }
            for webhook in try await source.webhookCopies(of: sourceProject.rowID) {
                let outcome = try await target.copyWebhook(webhook, into: project.rowID)
                if outcome == .copied {
                    tally.webhooks += 1
                } else {
                    tally.skipped.append(SkippedWebhook(webhook: webhook.publicID, project: project.projectId, outcome: outcome))
                }
            }
        }
        return tally
    }
}
