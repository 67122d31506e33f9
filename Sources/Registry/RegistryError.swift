/// Why a registry operation was refused. Each API family words these in its own envelope.
public enum RegistryError: Error, Sendable, Hashable {
    /// `create` with a group name the project already has.
    case groupNameTaken
    /// None of the tokens in the request can be used.
    case noValidRegistrationIds
    /// The group a key or name pointed at does not exist (any more).
    case groupNotFound
    /// `notification_key_name` and `notification_key` name different groups.
    case groupNameMismatch
    /// A string that is not a notification key this project issued.
    case undecryptableKey
    /// The operation would leave the group with more members than allowed.
    case groupFull(limit: Int)
    case invalidGroupName(String)
    case invalidTopicName
    /// A token that is not well-formed.
    case malformedToken
    /// A token the project does not know, or one that is unregistered.
    case tokenNotFound
    /// The token would exceed the topics-per-token limit.
    case tooManyTopics(limit: Int)
    case subscriptionExists
    case subscriptionNotFound
    case invalidProject(String)
    case projectExists(String)
    case projectNotFound(String)
    case serverKeyNotFound
    /// A key's name, scopes or grace period the server refuses: why, and which field.
    case invalidServerKey(String, field: String)
    /// The change would leave the project without a key that has the `admin` scope.
    case lastAdminKey
    case serviceAccountNotFound
    /// A token attribute (`TokenAttributes`) the server refuses: which, and why.
    case invalidTokenAttribute(TokenAttributeProblem)
    /// A project's token policy (`TokenPolicy`) the server refuses: which setting, and why.
    case invalidTokenPolicy(TokenPolicyProblem)
    /// A token re-keyed to itself.
    case rekeyToSameToken
    /// No logged message has this id in the project (never sent, or evicted from the log).
    case messageNotFound
    /// The message's delivery has finished (or was cancelled): there is nothing left to cancel.
    case messageFinished
    /// A `pageToken` the listing did not issue (another listing's, or edited).
    case invalidPageToken
    /// The process holds as many injected faults as it keeps.
    case tooManyFaults(limit: Int)
    /// A subscription call naming a topic with a fault (`TopicFault`): FCM's "the rate of
    /// subscription requests to this topic is too high"; nothing changed.
    case topicSubscriptionRateExceeded(retryAfter: Int?)
    /// Another process holds the database's write lock (an operator's `sqlite3` shell, say) for
    /// longer than the busy timeout: nothing was written; try again later.
    case storeBusy
    /// No webhook has this id in the project.
    case webhookNotFound
    /// The project has as many webhooks as it may.
    case tooManyWebhooks(limit: Int)
    /// A webhook URL the server refuses: why, in words.
    case invalidWebhookURL(String)
    /// A webhook's `events` that are not a list of known event types.
    case invalidWebhookEvents(String)
}
