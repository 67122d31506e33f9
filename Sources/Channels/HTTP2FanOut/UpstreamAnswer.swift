/// One request's answer from the upstream, cut to what a channel reads: its status, its
/// `Retry-After`, and the beginning of an error's body (where the upstream says why, as FCM's
/// error code or APNs's reason; the channel reads it, the fan-out never does).
public struct UpstreamAnswer: Sendable {
    /// The final status (an interim 1xx answer is skipped).
    public var status: Int
    /// The `Retry-After` header in seconds, within 0...`maximumRetryAfter`.
    public var retryAfter: Int?
    /// The body of an answer that is not a success, at most `maximumBodyBytes`; a success's is
    /// not kept (empty).
    public var body: [UInt8]

    public init(status: Int, retryAfter: Int? = nil, body: [UInt8] = []) {
        self.status = status
        self.retryAfter = retryAfter
        self.body = body
    }

    /// The most of an answer's body that is kept: the upstreams' answers are small (a name, or an
    /// error with details).
    public static let maximumBodyBytes = 64 << 10
    /// The longest `Retry-After` taken from an upstream, in seconds: an hour.
    public static let maximumRetryAfter = 3600
}

/// What a page asks before each of its requests starts, and tells when an answer closes the
/// quota (a 429): the quota is usually wider than the page (a project's), so one answer may stop
/// every page that shares it. Closures, so that any channel's own gate passes its two without the
/// fan-out knowing it.
public struct FanOutGate: Sendable {
    /// Whether no new request may start now.
    public var isClosed: @Sendable () -> Bool
    /// An answer closed the quota, with its `Retry-After` (seconds) when it has one.
    public var quotaClosed: @Sendable (_ retryAfter: Int?) -> Void

    public init(isClosed: @escaping @Sendable () -> Bool, quotaClosed: @escaping @Sendable (_ retryAfter: Int?) -> Void)
    {
        self.isClosed = isClosed
        self.quotaClosed = quotaClosed
    }
}
