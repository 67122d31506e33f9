/// How an HTTP listener bounds its connections; `serve` sets each from an option.
public struct HTTPSettings: Sendable {
    public var host = "127.0.0.1"
    public var port = 8080
    /// A connection idle this long (no request in progress, or a request stalled mid-way) is closed.
    public var idleTimeout = Duration.seconds(60)
    /// The whole request head must arrive within this time of the connection's first byte, or of the previous answer.
    public var headerTimeout = Duration.seconds(10)
    /// The whole request body must arrive within this time of its head.
    public var bodyTimeout = Duration.seconds(30)
    /// Open connections at most; past it the listener stops accepting until one closes.
    public var maximumConnections = 4096
    /// `GET /readyz` answers 503 while the audience index has not been current for longer.
    public var readyMaximumLag = Duration.seconds(10)

    public init() {}
}
