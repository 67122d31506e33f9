/// A failure of the connection to a store's database, not of the request: the database could
/// not be reached, or dropped the connection before the request's transaction committed. The API
/// answers it as "unavailable, try again" (HTTP 503 with `Retry-After`) rather than as an
/// internal error, and the request may be sent again as it was.
public protocol StoreConnectionFailure: Error {
    /// Whether this error is such a failure, with nothing written. A connection lost while a
    /// commit was under way is not: the write may have committed.
    var meansUnavailable: Bool { get }
    /// What went wrong, for the log: codes, never a query or its values.
    var summary: String { get }
}
