import Registry

/// The hub as the other front ends see it: the HTTP application's upstream, sessions and drain
/// routes and its metrics reach it through this seam alone, never through this target.
extension XMPPHub: AppServerSessions {
    public var waitingPerProject: Int { limits.waitingPerProject }

    /// A device's upstream message, to whichever session has room first.
    public func deliver(_ message: UpstreamMessage, to project: Project) async throws -> UpstreamDelivery {
        try await deliver(message, to: project, preferring: nil)
    }
}
