import Registry

/// The words of a request refused before the registry is asked (a field missing, a value out of
/// range, a query parameter it cannot read), written once beside `RefusalWording` and
/// `ProblemWording`, so that each wording has one place and the controllers only name it. Each
/// family wraps a `BadRequest` in its own envelope; `field` is the request field at fault.
extension BadRequest {
    // MARK: - Pages

    /// A native listing's `pageSize` that is zero or negative.
    public static let pageSizeNotPositive = BadRequest("pageSize must be a positive integer", field: "pageSize")

    // MARK: - FCM's device groups (`/fcm/notification`)

    public static let groupOperationRequired = BadRequest("operation is required: create, add or remove")
    public static let registrationIDsRequired = BadRequest("registration_ids is required")
    public static let groupNameRequired = BadRequest("notification_key_name is required")
    public static let groupNameRequiredToCreate = BadRequest("notification_key_name is required to create a group")

    /// `add` or `remove` without the group's notification key; `operation` as the caller wrote it, lowercased.
    public static func notificationKeyRequired(toChange operation: String) -> BadRequest {
        BadRequest("notification_key is required to \(operation) members")
    }

    public static func unknownGroupOperation(_ operation: String) -> BadRequest {
        BadRequest("unknown operation '\(operation)': use create, add or remove")
    }

    // MARK: - Instance ID's topic subscriptions (`/v1/projects/…/registrations`)

    public static let topicNameRequired = BadRequest("topic_name is required", field: "topic_name")
    public static let topicPageSizeNotInteger = BadRequest("pageSize must be an integer", field: "page_size")
    public static let topicPageTokenInvalid = BadRequest("Invalid page token", field: "page_token")

    // MARK: - Audiences and conditions (`/api/audience`, `/api/conditions`)

    public static let oneAudienceTarget = BadRequest(
        "give exactly one of token, notificationKey, group, topic, condition")
    public static let conditionRequired = BadRequest("condition is required")
    public static let unknownDialect = BadRequest("dialect must be legacy, v1 or extended", field: "dialect")

    public static let projectPatchKeys = BadRequest(
        "tokenPolicy is the one setting PATCH /api/project takes, such as {\"tokenPolicy\":{\"expireAfter\":\"23328000s\"}}",
        field: "tokenPolicy")

    public static let whereNotObject = BadRequest(
        "where must be a JSON object such as {\"platform\":[\"ios\"],\"locale\":[\"fr\"]}", field: "where")

    public static let unknownWhereKey = BadRequest(
        "where takes only platform, locale, timeZone, appVersion and seenWithin", field: "where")

    public static func whereValues(_ key: String, maximum: Int) -> BadRequest {
        BadRequest("where.\(key) must be an array of 1 to \(maximum) strings", field: "where.\(key)")
    }

    /// A value of `where` no token could say, in the words `PUT /api/tokens/{token}` refuses it with.
    public static func whereValue(_ problem: TokenAttributeProblem) -> BadRequest {
        BadRequest("where.\(problem.words)", field: "where.\(problem.field)")
    }

    public static let whereAppVersion = BadRequest(
        "where.appVersion must be {\"min\":…,\"max\":…} with one or both, each one to four dot-separated numbers such as 5.12.0",
        field: "where.appVersion")
    public static let whereAppVersionEmpty = BadRequest(
        "where.appVersion.min must not be above where.appVersion.max", field: "where.appVersion")

    public static func whereSeenWithin(maximumSeconds: Int) -> BadRequest {
        BadRequest(
            "where.seenWithin must be a positive duration in seconds such as \"2592000s\", at most \"\(maximumSeconds)s\"",
            field: "where.seenWithin")
    }

    // MARK: - Tokens (`/api/tokens`)

    public static let rekeyTargetRequired = BadRequest("to is required: the registration id to move to", field: "to")
    public static let rekeyPairsRequired = BadRequest(
        "pairs is required: [{\"from\":…,\"to\":…}, …]", field: "pairs")

    public static func tooManyRekeyPairs(limit: Int) -> BadRequest {
        BadRequest("pairs holds at most \(limit) pairs", field: "pairs")
    }

    // MARK: - Token attributes (`POST /api/tokens:batchUpdate`)

    public static let tokenUpdatesRequired = BadRequest(
        "tokens is required: [{\"token\":…, \"platform\":…, …}, …]", field: "tokens")

    public static func tooManyTokenUpdates(limit: Int) -> BadRequest {
        BadRequest("tokens holds at most \(limit) tokens", field: "tokens")
    }

    public static func tokenUpdateNotObject(at index: Int) -> BadRequest {
        BadRequest("tokens[\(index)] must be a JSON object with a token", field: "tokens")
    }

    public static let topicsRequired = BadRequest("topics is required: an array of topic names")

    // MARK: - Listings (`/api/topics`, `/api/groups`)

    public static let unknownTopicOrder = BadRequest("orderBy must be name or subscriberCount", field: "orderBy")

    public static func prefixTooLong(maximumBytes: Int) -> BadRequest {
        BadRequest("prefix must be at most \(maximumBytes) bytes", field: "prefix")
    }

    // MARK: - An emulated device's upstream message (`/api/tokens/{token}/upstream`)

    public static let upstreamCategoryLength = BadRequest(
        "category is the app's package name: 1 to 256 bytes", field: "category")

    public static func upstreamDataTooBig(maximumBytes: Int) -> BadRequest {
        BadRequest("upstream data is at most \(maximumBytes) bytes of keys and values", field: "data")
    }

    public static let upstreamMessageIDLength = BadRequest("messageId is 1 to 256 bytes", field: "messageId")

    // MARK: - Injected faults (`/api/faults`)

    /// `kinds`: the fault kinds' names, joined by ", ".
    public static func unknownFaultKind(_ kinds: String) -> BadRequest {
        BadRequest("error must be one of \(kinds)", field: "error")
    }

    public static func faultTimesOutOfRange(maximum: Int) -> BadRequest {
        BadRequest("times is 1 to \(maximum), or absent for until deleted", field: "times")
    }

    public static func faultRetryAfterInvalid(maximumSeconds: Int) -> BadRequest {
        BadRequest("retryAfter is a duration such as \"2s\", at most \(maximumSeconds)s", field: "retryAfter")
    }

    // MARK: - Messages, deliveries and counts (`/api/messages`, `/api/stats`)

    public static let validateProtocolNotXMPP = BadRequest(
        "protocol must be \"xmpp\"; validate legacy messages with dry_run on /fcm/send and v1 messages with validate_only",
        field: "protocol")
    public static let unknownDeliveryState = BadRequest(
        "state must be pending, delivered, failed or cancelled", field: "state")
    public static let statsWindowInvalid = BadRequest(
        "window must be a number of minutes or hours from 1m to 24h, such as 60m or 24h", field: "window")

    // MARK: - Webhooks (`/api/webhooks`)

    public static let webhookURLRequired = BadRequest("url is required", field: "url")
    public static let webhookEventsRequired = BadRequest("events is required", field: "events")

    // MARK: - Server keys (`/api/keys`)

    public static let keyNameRequired = BadRequest("name is required", field: "name")
    public static let keyScopesRequired = BadRequest("scopes is required", field: "scopes")
    public static let tooManyKeyScopes = BadRequest("scopes names at most 4 scopes", field: "scopes")

    public static func gracePeriodInvalid(maximumSeconds: Int64) -> BadRequest {
        BadRequest(
            "gracePeriod is a duration such as \"86400s\", at most \(maximumSeconds)s (7 days)", field: "gracePeriod")
    }

    // MARK: - The audit log (`/api/audit`)

    /// `actions`: the actions' names, joined by ", ".
    public static func unknownAuditAction(_ actions: String) -> BadRequest {
        BadRequest("action is one of \(actions)", field: "action")
    }

    public static let auditSinceInvalid = BadRequest(
        "since is an RFC 3339 time such as 2026-11-01T00:00:00Z", field: "since")
}
