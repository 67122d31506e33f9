import Registry

/// The words of a refusal (`RegistryError`) where an API family has none of FCM's own: the
/// native API's message, legacy's text and v1's message, and the command line's line. The HTTP
/// side puts them in each family's envelope and keeps only FCM's exact words for the cases FCM
/// words otherwise; the command line says a refusal as `POST /api/…` would.
public struct RefusalWording: Sendable, Equatable {
    /// Which answer the refusal is: what the HTTP side turns into a status.
    public enum Kind: Sendable, Equatable {
        /// The request cannot be done as asked (400).
        case invalid
        /// What it names does not exist (404).
        case notFound
        /// What it would create exists already (409).
        case conflict
        /// What it acts on is not in a state that allows it (409).
        case failedPrecondition
        /// Nothing was done; the same request may succeed shortly (503).
        case unavailable
    }

    public var kind: Kind
    public var message: String
    /// The request field at fault, for v1's field violations.
    public var field: String?

    public init(_ kind: Kind, _ message: String, field: String? = nil) {
        self.kind = kind
        self.message = message
        self.field = field
    }
}

extension RegistryError {
    /// This refusal's words (see `RefusalWording`).
    public var wording: RefusalWording {
        switch self {
        case .groupNameTaken: RefusalWording(.invalid, "notification_key already exists")
        case .noValidRegistrationIds: RefusalWording(.invalid, "no valid registration ids")
        case .groupNotFound: RefusalWording(.invalid, "notification_key not found")
        case .groupNameMismatch:
            RefusalWording(.invalid, "notification_key_name doesn't match the group name of the notification_key")
        case .undecryptableKey: RefusalWording(.invalid, "Error decrypting GroupToken")
        case .groupFull(let limit):
            RefusalWording(.invalid, "too many registration ids: a device group holds at most \(limit) members")
        case .invalidGroupName(let message): RefusalWording(.invalid, message, field: "notification_key_name")
        case .invalidTopicName:
            RefusalWording(.invalid, "Topic name must match [a-zA-Z0-9-_.~%]{1,900}", field: "topic_name")
        case .malformedToken:
            RefusalWording(.invalid, "a token is 1 to 4096 characters of A-Z a-z 0-9 _ : . -", field: "token")
        case .tokenNotFound: RefusalWording(.notFound, "the token is not registered")
        case .tooManyTopics(let limit):
            RefusalWording(.invalid, "the token is already subscribed to the maximum of \(limit) topics")
        case .subscriptionExists: RefusalWording(.conflict, "the token is already subscribed to the topic")
        case .subscriptionNotFound: RefusalWording(.notFound, "no such subscription")
        case .invalidProject(let message), .projectExists(let message): RefusalWording(.invalid, message)
        case .projectNotFound(let name): RefusalWording(.notFound, "no project \(name)")
        case .serverKeyNotFound: RefusalWording(.notFound, "no such server key")
        case .invalidServerKey(let message, let field): RefusalWording(.invalid, message, field: field)
        case .lastAdminKey:
            RefusalWording(.failedPrecondition, "a project keeps at least one admin key: make another before revoking this one")
        case .serviceAccountNotFound: RefusalWording(.notFound, "no such service account")
        case .messageNotFound:
            RefusalWording(.notFound, "no logged message has this id: it was never sent here, or the log dropped it")
        case .messageFinished:
            RefusalWording(.failedPrecondition, "the message has finished: nothing is left to send or cancel")
        case .rekeyToSameToken:
            RefusalWording(.invalid, "to must be another registration id than the token re-keyed", field: "to")
        case .invalidPageToken:
            RefusalWording(
                .invalid, "pageToken is not one this listing issued: pass the previous page's nextPageToken",
                field: "pageToken")
        case .tooManyFaults(let limit):
            RefusalWording(.invalid, "the server holds \(limit) faults already: delete some first")
        case .topicSubscriptionRateExceeded:
            RefusalWording(
                .unavailable, "the rate of subscription requests to this topic is too high; back off, then try again")
        case .storeBusy:
            RefusalWording(.unavailable, "the database is locked by another process; try again shortly")
        case .webhookNotFound: RefusalWording(.notFound, "no webhook has this id in the project")
        case .tooManyWebhooks(let limit):
            RefusalWording(.invalid, "the project has \(limit) webhooks already: delete one first")
        case .invalidWebhookURL(let message): RefusalWording(.invalid, message, field: "url")
        case .invalidWebhookEvents(let message): RefusalWording(.invalid, message, field: "events")
        case .invalidTokenAttribute(let problem): RefusalWording(.invalid, problem.words, field: problem.field)
        case .invalidTokenPolicy(let problem): RefusalWording(.invalid, problem.words, field: problem.field)
        }
    }
}

extension TokenAttributeProblem {
    /// What `PUT /api/tokens/{token}` and `tokens:batchUpdate` answer for a refused attribute.
    public var words: String {
        switch self {
        case .platform: "platform must be one of android, ios, web"
        case .locale: "locale must be a BCP 47 language tag such as fr or fr-CA"
        case .timeZone: "timeZone must be an IANA time zone name such as Europe/Paris"
        case .appVersion: "appVersion must be one to four dot-separated numbers such as 5.12.0"
        case .lastSeenInFuture: "lastSeenAt must not be in the future"
        case .lastSeenCleared: "lastSeenAt cannot be cleared: leave it out to set it to now"
        case .lastSeenNotTime: "lastSeenAt must be an RFC 3339 time such as 2026-11-28T09:00:00Z"
        }
    }
}

extension TokenPolicyProblem {
    /// What `PATCH /api/project` and `project tokens` answer for a refused token policy.
    public var words: String {
        switch self {
        case .staleAfterRange:
            "tokenPolicy.staleAfter must be whole seconds from 3600s (an hour) to 315360000s (3650 days)"
        case .expireAfterRange:
            "tokenPolicy.expireAfter must be whole seconds from 3600s (an hour) to 315360000s (3650 days), "
                + "or null for none"
        case .expireNotAfterStale: "tokenPolicy.expireAfter must be longer than staleAfter"
        case .staleAfterNotDuration: "tokenPolicy.staleAfter must be a duration in seconds such as \"2592000s\""
        case .expireAfterNotDuration:
            "tokenPolicy.expireAfter must be a duration in seconds such as \"23328000s\", or null for none"
        case .sendToStaleNotBoolean: "tokenPolicy.sendToStale must be true or false"
        case .notObject: "tokenPolicy must be a JSON object such as {\"staleAfter\":\"2592000s\"}"
        case .unknownKey: "tokenPolicy takes only staleAfter, expireAfter and sendToStale"
        case .empty: "tokenPolicy must name at least one of staleAfter, expireAfter and sendToStale"
        }
    }
}
