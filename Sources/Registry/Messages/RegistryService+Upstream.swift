import Foundation

/// Upstream messages and receipts on their way to an app server's XMPP session, through the
/// registry rather than around it: the hub that routes them asks here, and only the service
/// reaches the store (`UpstreamStore`), as for every other front end's call.
extension RegistryService {
    /// Adds a message that waits for one of the project's sessions.
    /// - Returns: its row id, or `nil` when `limit` of the project's messages already wait.
    public func addUpstream(_ message: UpstreamMessage, to project: Project, limit: Int) async throws -> Int64? {
        try await upstream.addUpstream(message, project: project.rowID, limit: limit, now: Date())
    }

    /// Claims, for `holder`, up to `room[project]` waiting messages of each project, oldest first,
    /// under a lease of `lease`.
    public func claimUpstream(room: [Int64: Int], holder: String, lease: Duration) async throws -> [HeldUpstream] {
        try await upstream.claimUpstream(room: room, holder: holder, lease: lease)
    }

    /// Deletes messages the app server acknowledged, or that no longer need to reach it.
    public func removeUpstream(_ ids: [Int64]) async throws {
        try await upstream.removeUpstream(ids)
    }

    /// Hands messages `holder` holds back, to wait for another session.
    public func releaseUpstream(_ ids: [Int64], holder: String) async throws {
        try await upstream.releaseUpstream(ids, holder: holder)
    }

    /// Extends the lease of the messages `holder` still holds among `ids`.
    public func renewUpstream(_ ids: [Int64], holder: String, lease: Duration) async throws {
        try await upstream.renewUpstream(ids, holder: holder, lease: lease)
    }

    /// How many of the project's messages wait for a session, on every server; every project's
    /// with `nil`.
    public func waitingUpstream(in project: Project?) async throws -> Int {
        try await upstream.waitingUpstream(project: project?.rowID, now: Date())
    }
}
