/// The words the servers say for themselves, outside a message's problems (`ProblemWording`), the
/// registry's refusals (`RefusalWording`) and a request's bad fields (`RequestWording`): who is
/// not let in, what a native route did not find, a held `Idempotency-Key`. Written once here so
/// that the call sites name them and tests and docs quote one place.
public enum ServerWording {
    // MARK: - Authentication (every HTTP family)

    public static let noServerKey = "the request has no server key: send Authorization: key=<server key>"
    public static let credentialsNotValid = "the server key or access token is not valid, or it was revoked or expired"

    /// A `project_id` header naming another project than the credentials'; `carried`: "server key"
    /// or "access token".
    public static func projectHeaderMismatch(carried: String, projectID: String, senderID: String) -> String {
        "the project_id header names another project than the \(carried)'s "
            + "(project \(projectID), sender \(senderID))"
    }

    // MARK: - Not found (native)

    public static let tokenHasNoFault = "the token has no fault"
    public static let projectHasNoFault = "the project has no fault"
    public static let topicHasNoFault = "the topic has no fault"

    public static func noDrainableConnection(_ id: String) -> String {
        "no connection \(id) that is not already draining"
    }

    public static func noConsoleFile(_ name: String) -> String {
        "the console has no file named \(name)"
    }

    // MARK: - Idempotency-Key (the send routes)

    /// 409: the first request with the key is still being answered.
    public static let idempotencyKeyInProgress =
        "a request with this Idempotency-Key is still being answered; send it again in a moment"
    /// 422: the key was used for another request.
    public static let idempotencyKeyReused =
        "this Idempotency-Key was used for another request; a key names one request (use a new key for a new request)"
}

/// The XMPP connection server's own words: a nack it gives before or instead of the pipeline, the
/// text of a stanza error for a message it cannot read, and why it closes a stream.
public enum XMPPWording {
    /// A nack's `error` code and `error_description`.
    public struct Nack: Sendable, Equatable {
        public var code: String
        public var description: String

        public init(_ code: String, _ description: String) {
            self.code = code
            self.description = description
        }
    }

    public static let draining = Nack(
        "CONNECTION_DRAINING", "this connection is draining: send over another connection")

    public static func tooManyPending(_ limit: Int) -> Nack {
        Nack("SERVICE_UNAVAILABLE", "\(limit) messages already await their ack on this connection")
    }

    /// The database was busy or out of reach: nothing was done, the same message may be sent again.
    public static let storeBusy = Nack(
        "SERVICE_UNAVAILABLE", "the database is busy or out of reach: retry with backoff")
    public static let internalError = Nack("INTERNAL_SERVER_ERROR", "internal error")
    public static let badAck = Nack("BAD_ACK", "an ack has message_type \"ack\", to and message_id")

    /// The text of the stanza error answering a message that cannot be read, CCS's format.
    public static func jsonParsingError(_ reason: String) -> String {
        "InvalidJson: JSON_PARSING_ERROR : \(reason)\n"
    }

    /// The reason when the JSON decoder gave none of its own.
    public static let invalidJSON = "Invalid JSON"
    public static let missingMessageID = "Missing Required Field: message_id"

    /// Why a stream is closed at login.
    public static func tooManyConnections(_ limit: Int) -> String {
        "a sender has at most \(limit) connections"
    }

    public static let stopping = "the server is stopping"
}
