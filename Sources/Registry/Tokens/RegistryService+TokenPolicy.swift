import Foundation

/// A project's token policy (`TokenPolicy`): read by every route that says whether a token is
/// fresh, changed by `PATCH /api/project` and `project tokens`.
extension RegistryService {
    /// The project's token policy: FCM's guidance (`TokenPolicy.standard`) until it is changed.
    /// Read at most once a second (`ProjectSettingCache`); a change through this process is seen at once.
    public func tokenPolicy(of project: Project) async throws -> TokenPolicy {
        try await tokenPolicyCache.value(of: project.rowID) { try await store.tokenPolicy(of: project) }
    }

    /// Makes `change` to the project's policy: the settings it leaves out keep their value. The
    /// policy that results is checked as a whole (`TokenPolicy.validate`) before anything is
    /// written; audited as `tokenPolicy.changed` when `actor` says who asked. The expiry sweep
    /// runs a round under the new policy within a tick of its timer (a minute at most).
    /// - Returns: the policy as it is now.
    /// - Throws: `RegistryError.invalidTokenPolicy` naming the setting at fault; nothing changes.
    @discardableResult
    public func setTokenPolicy(_ change: TokenPolicyChange, for project: Project, by actor: AuditActor? = .commandLine)
        async throws -> TokenPolicy
    {
        guard !change.isEmpty else { throw RegistryError.invalidTokenPolicy(.empty) }
        let policy = change.applied(to: try await store.tokenPolicy(of: project))
        try policy.validate()
        let entry = audit(
            .tokenPolicyChanged, target: project.projectId, details: Self.details(of: policy), by: actor,
            project: project.rowID)
        try await store.setTokenPolicy(policy, for: project, audit: entry)
        tokenPolicyCache.forget(project.rowID)
        return policy
    }

    /// The policy as the audit log records it: each setting in seconds, `off` for no expiry.
    static func details(of policy: TokenPolicy) -> [String: String] {
        [
            "staleAfter": "\(policy.staleAfter.components.seconds)s",
            "expireAfter": policy.expireAfter.map { "\($0.components.seconds)s" } ?? "off",
            "sendToStale": "\(policy.sendToStale)",
        ]
    }
}
