/// Topic subscriptions: the Instance ID API and the v1 topicSubscriptions API.
extension RegistryService {
    /// `batchAdd`: one outcome per input token, in input order.
    /// - Throws: `.invalidTopicName`, `.topicSubscriptionRateExceeded`; the caller has already checked the token count.
    public func subscribe(_ tokens: [String], to topic: String, in project: Project) async throws -> [BatchOutcome] {
        try checkTopicName(topic)
        try checkTopicFault(topic, in: project)
        return try await batch(tokens) { usable in
            applied(try await store.subscribe(usable, to: topic, topicLimit: limits.topicsPerToken, in: project))
        }
    }

    /// `batchRemove`: one outcome per input token, in input order.
    public func unsubscribe(_ tokens: [String], from topic: String, in project: Project) async throws -> [BatchOutcome]
    {
        try checkTopicName(topic)
        try checkTopicFault(topic, in: project)
        return try await batch(tokens) { usable in
            applied(try await store.unsubscribe(usable, from: topic, in: project))
        }
    }

    /// Runs `operation` on the well-formed, distinct tokens and spreads its outcomes back over the
    /// input: malformed tokens get `INVALID_ARGUMENT`, repeats get the outcome of their first copy.
    private func batch(_ tokens: [String], _ operation: ([String]) async throws -> [BatchOutcome]) async throws
        -> [BatchOutcome]
    {
        let usable = usableTokens(tokens)
        let outcomes = usable.isEmpty ? [] : try await operation(usable)
        let byToken = Dictionary(uniqueKeysWithValues: zip(usable, outcomes))
        return tokens.map { byToken[$0] ?? .invalidArgument }
    }

    /// Subscribes one token (IID `rel/topics`, v1 create).
    /// - Throws: `.malformedToken`, `.invalidTopicName`, `.topicSubscriptionRateExceeded`, `.subscriptionExists`,
    ///   `.tokenNotFound`, `.tooManyTopics`.
    public func createSubscription(token: String, topic: String, in project: Project) async throws -> SubscriptionInfo {
        try checkToken(token)
        try checkTopicName(topic)
        try checkTopicFault(topic, in: project)
        return applied(
            try await store.createSubscription(token: token, topic: topic, topicLimit: limits.topicsPerToken, in: project))
    }

    /// Whether a subscription was there to delete.
    public func deleteSubscription(token: String, topic: String, in project: Project) async throws -> Bool {
        try checkToken(token)
        try checkTopicName(topic)
        try checkTopicFault(topic, in: project)
        return applied(try await store.deleteSubscription(token: token, topic: topic, in: project))
    }

    public func subscription(token: String, topic: String, in project: Project) async throws -> SubscriptionInfo? {
        try checkToken(token)
        try checkTopicName(topic)
        return try await store.subscription(token: token, topic: topic, in: project)
    }

    /// A page of a token's subscriptions; `nil` when the token is unknown or unregistered.
    public func subscriptions(ofToken token: String, in project: Project, after: String?, pageSize: Int?) async throws
        -> Page<SubscriptionInfo>?
    {
        try checkToken(token)
        return try await store.subscriptions(ofToken: token, in: project, after: after, limit: self.pageSize(pageSize))
    }

    /// Sets a token's topics in one transaction; returns what was added and removed.
    public func setTopics(_ topics: [String], ofToken token: String, in project: Project) async throws
        -> TopicChanges
    {
        try checkToken(token)
        for topic in topics { try checkTopicName(topic) }
        var seen = Set<String>()
        let distinct = topics.filter { seen.insert($0).inserted }
        return applied(
            try await store.setTopics(distinct, ofToken: token, topicLimit: limits.topicsPerToken, in: project))
    }

    /// Every subscription of a token, read page by page; `nil` when the token is unknown or unregistered.
    public func allSubscriptions(ofToken token: String, in project: Project) async throws -> [SubscriptionInfo]? {
        try checkToken(token)
        var all: [SubscriptionInfo] = []
        var after: String?
        repeat {
            guard
                let page = try await store.subscriptions(
                    ofToken: token, in: project, after: after, limit: limits.maximumPageSize)
            else { return nil }
            all += page.items
            after = page.nextAfter
        } while after != nil
        return all
    }
}
