/// Tokens: what the registry knows of each, and the app server's reports of dead ones.
extension RegistryService {
    public func token(_ token: String, in project: Project) async throws -> TokenInfo? {
        try checkToken(token)
        return try await store.token(token, in: project)
    }

    /// Registers the token (again, when it was unregistered) and applies `change` to what it says
    /// of its device; it was seen now, unless the change says when.
    public func registerToken(
        _ token: String, change: TokenAttributeChange = TokenAttributeChange(), in project: Project
    ) async throws -> TokenInfo
    {
        try checkToken(token)
        return applied(try await store.registerToken(token, change: change, in: project))
    }

    /// `registerToken(_:change:in:)` for each token, in one transaction: their infos, in order.
    /// The caller bounds how many (`limits.tokensPerBatch` over HTTP).
    public func updateTokens(_ changes: [(token: String, change: TokenAttributeChange)], in project: Project)
        async throws -> [TokenInfo]
    {
        guard !changes.isEmpty else { return [] }
        for (token, _) in changes { try checkToken(token) }
        return applied(try await store.updateTokens(changes, in: project))
    }

    /// Unregisters a dead token: it leaves every group and topic at once. Audited as
    /// `token.unregistered` when `actor` says who asked.
    public func unregisterToken(_ token: String, in project: Project, by actor: AuditActor? = nil) async throws
        -> TokenInfo?
    {
        try checkToken(token)
        let audit = audit(.tokenUnregistered, target: token, by: actor, project: project.rowID)
        return applied(try await store.unregisterToken(token, in: project, audit: audit))
    }

    /// Moves a device to a new registration id (a token to its Firebase installation id) in one
    /// transaction: `to` joins every topic and group of `from`, merged with its own, within the
    /// topic and member limits; `from` is unregistered.
    /// - Throws: `.malformedToken`, `.rekeyToSameToken`, `.tokenNotFound`, `.tooManyTopics`, `.groupFull`.
    public func rekey(_ from: String, to: String, in project: Project) async throws -> Rekeyed {
        try checkToken(from)
        try checkToken(to)
        guard from != to else { throw RegistryError.rekeyToSameToken }
        return applied(
            try await store.rekey(
                from, to: to, topicLimit: limits.topicsPerToken, memberLimit: limits.membersPerGroup, in: project))
    }
}

/// Faults the emulator plays (`InjectedFault`).
extension RegistryService {
    /// Makes the next sends to `token` (or, with `nil`, every send of the project) fail as `fault` says.
    /// - Throws: `.malformedToken`; `.tooManyFaults` when the process holds as many as it keeps.
    public func injectFault(_ fault: InjectedFault, token: String?, in project: Project) throws(RegistryError) {
        if let token { try checkToken(token) }
        guard faults.set(fault, token: token, project: project.rowID) else {
            throw .tooManyFaults(limit: FaultBoard.capacity)
        }
    }

    /// - Returns: whether there was a fault to remove.
    public func removeFault(token: String?, in project: Project) throws(RegistryError) -> Bool {
        if let token { try checkToken(token) }
        return faults.remove(token: token, project: project.rowID)
    }
}
