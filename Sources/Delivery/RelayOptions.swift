/// How the relay works, as `serve`'s `--relay-…` options set it (see `docs/relay.md`).
public struct RelayOptions: Sendable, Hashable {
    /// How long a direct send's answer waits for FCM's outcomes, retries included; past it, what
    /// is still pending is answered as accepted and delivery goes on.
    public var answerTimeout: Duration = .seconds(10)
    /// Attempts of one recipient through 5xx answers and connection errors, the first included.
    public var maximumAttempts = 5
    /// How long after its send a message is still retried; its time to live, when shorter.
    public var deadline: Duration = .seconds(24 * 3600)
    /// Sends per second to FCM, per project: FCM's quota is 600,000 a minute.
    public var ratePerSecond = 10_000
    /// How long a claim on an outbox job lasts without being renewed: a dead server's claims pass
    /// to another after it.
    public var lease: Duration = .seconds(30)
    /// Unfinished messages a project's outbox holds; past it, sends are refused as unavailable.
    public var outboxMessages = 10_000
    /// Requests to FCM in flight at once for one message (HTTP/2 streams, shared among the
    /// connections of `HTTP2Upstream`).
    public var concurrency = 200
    /// Recipients read and sent together (their outcomes are recorded as they arrive): the
    /// quota's slow start and a fan-out's turn are counted in pages.
    public var pageSize = 500
    /// How often the outbox is looked at for work another server left or a retry that fell due.
    public var pollInterval: Duration = .seconds(1)
    /// One request to FCM or to the token endpoint, from connect to the answer's end.
    public var requestTimeout: Duration = .seconds(30)
    /// A PEM file of CA certificates trusted besides the system's, for a proxy or an emulator.
    public var caFile: String?

    public init() {}
}
