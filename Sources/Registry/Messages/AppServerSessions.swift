import Foundation

/// The app servers' sessions that take upstream messages (FCM's XMPP connection server), as the
/// other front ends reach them: the native API sends upstream as a device, lists a project's
/// sessions and drains them, and `GET /metrics` counts them.
///
/// `XMPPHub` implements it and the composition root hands it to the HTTP application, so neither
/// front end imports the other (as `GroupMirror` keeps HTTP clients out of the domain).
public protocol AppServerSessions: Sendable {
    /// How many of a project's upstream messages may wait for a session: what a refusal names.
    var waitingPerProject: Int { get }
    /// Authenticated sessions, every project's, on this server.
    var sessionCount: Int { get }
    /// The project's sessions on this server, oldest first.
    func sessions(of project: Project) -> [AppServerSession]
    /// Adds an upstream message from a device, to go to one of the project's sessions on any
    /// server (or to wait in the store for one).
    func deliver(_ message: UpstreamMessage, to project: Project) async throws -> UpstreamDelivery
    /// Drains one session of the project, or all of them with `nil`; returns the ids drained.
    func drain(project: Project, session: String?) -> [String]
}

/// One connected, authenticated session.
public struct AppServerSession: Sendable {
    public var id: String
    public var project: Project
    public var jid: String
    public var connectedAt: Date
    public var draining: Bool
    /// Bound a resource: upstream messages may go to it.
    public var bound: Bool
    public var pendingDownstream: Int
    public var unackedUpstream: Int

    public init(
        id: String, project: Project, jid: String, connectedAt: Date, draining: Bool, bound: Bool,
        pendingDownstream: Int, unackedUpstream: Int
    ) {
        self.id = id
        self.project = project
        self.jid = jid
        self.connectedAt = connectedAt
        self.draining = draining
        self.bound = bound
        self.pendingDownstream = pendingDownstream
        self.unackedUpstream = unackedUpstream
    }
}

/// Where an upstream message went.
public enum UpstreamDelivery: Sendable, Equatable {
    case sent(connection: String)
    case waiting(position: Int)
    case queueFull
}
