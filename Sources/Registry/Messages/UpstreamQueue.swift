import Foundation

/// An upstream message (from an emulated device) or a delivery receipt, on its way to the app
/// server over one of its XMPP sessions.
public struct UpstreamMessage: Sendable, Equatable {
    public var messageID: String
    /// The `<gcm>` JSON, as the app server reads it.
    public var json: String
    public var isReceipt: Bool

    public init(messageID: String, json: String, isReceipt: Bool) {
        self.messageID = messageID
        self.json = json
        self.isReceipt = isReceipt
    }
}

/// An upstream message a server has claimed for one of its sessions.
public struct HeldUpstream: Sendable, Equatable {
    /// The message's row: what an ack deletes and a closed session hands back.
    public var id: Int64
    public var project: Int64
    public var message: UpstreamMessage

    public init(id: Int64, project: Int64, message: UpstreamMessage) {
        self.id = id
        self.project = project
        self.message = message
    }
}

/// Upstream messages and receipts in the store, so that they reach the app server's XMPP session
/// whichever server holds it, and outlive a restart (XMPP reference §5.3–§5.5).
///
/// Leases are read on each server's clock: servers sharing a database keep their clocks in step
/// (NTP), as the relay's leases already ask.
///
/// A message waits until a server with a session that has room claims it: the server holds it
/// under a lease it renews while the message is unacknowledged. The app server's ack deletes it;
/// a session that ends without acking hands it back, and so does the lease running out when its
/// server dies. Waiting messages are claimed oldest first.
public protocol UpstreamStore: Sendable {
    /// Adds a message that waits for a session.
    /// - Returns: its row id, or `nil` when `limit` of the project's messages already wait.
    func addUpstream(_ message: UpstreamMessage, project: Int64, limit: Int, now: Date) async throws -> Int64?
    /// Claims, for `holder`, up to `room[project]` waiting messages of each project, oldest first,
    /// for `lease` from the moment the claim is written (not from when it was asked for: a claim
    /// that waited for the database must not arrive expired).
    func claimUpstream(room: [Int64: Int], holder: String, lease: Duration) async throws -> [HeldUpstream]
    /// Deletes messages the app server acknowledged.
    func removeUpstream(_ ids: [Int64]) async throws
    /// Hands messages `holder` holds back, to wait for another session (one another server took
    /// over once the lease ran out stays with it).
    func releaseUpstream(_ ids: [Int64], holder: String) async throws
    /// Extends the lease of the messages `holder` still holds among `ids` (those its sessions
    /// have unacknowledged): a row it lost track of lapses and goes to another session.
    func renewUpstream(_ ids: [Int64], holder: String, lease: Duration) async throws
    /// How many of the project's messages wait (all projects' with `nil`).
    func waitingUpstream(project: Int64?, now: Date) async throws -> Int
}
