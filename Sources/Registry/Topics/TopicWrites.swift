import AudienceEngine

/// Subscribing and unsubscribing: the rules, once, over any store's statements
/// (`RegistryWriteDriver`), with the change-feed entries each write places. Rows are held in the
/// order every write takes them: tokens (sorted), then topics (by name).
extension RegistryWriting {
    /// One outcome per token, in order: `.ok`, `.notFound` (unregistered) or `.tooManyTopics`.
    /// Unknown tokens are registered. Isolation: serialized per token (the topics-per-token limit).
    public func subscribe(_ tokens: [String], to topic: String, topicLimit: Int, in project: Project) async throws
        -> Committed<[BatchOutcome]>
    {
        try await writing { driver, log in
            let now = EpochMilliseconds.now()
            let rows = try await driver.registeringNew(tokens, in: project, at: now, log: log)
            let (topicID, created) = try await driver.topicCreating(topic, in: project.rowID, at: now)
            // A token registered just now has no topics: only the others are looked up, in two reads.
            let known = rows.values.filter { !$0.isNew && $0.state == .registered }.map(\.id)
            var subscribed = known.isEmpty ? [] : try await driver.subscribed(known, to: topicID)
            let unsubscribed = known.filter { !subscribed.contains($0) }
            var counts = unsubscribed.isEmpty ? [:] : try await driver.topicCounts(of: unsubscribed)
            var added: [Int64] = []
            let outcomes = tokens.map { value -> BatchOutcome in
                guard let row = rows[value], row.state == .registered else { return .notFound }
                if subscribed.contains(row.id) { return .ok }
                if counts[row.id, default: 0] >= topicLimit { return .tooManyTopics }
                subscribed.insert(row.id)
                counts[row.id, default: 0] += 1
                added.append(row.id)
                return .ok
            }
            if !added.isEmpty { try await driver.insertSubscriptions(added, to: topicID, at: now) }
            // A topic this write created and left empty goes again; no other write can hold it yet.
            if added.isEmpty, created { try await driver.deleteTopic(topicID) }
            log.record(.subscribed(project: project.rowID, topic: topic, tokens: added.map { UInt32($0) }))
            return outcomes
        }
    }

    /// One outcome per token, in order: `.ok` (also when it was not subscribed, or is unknown) or
    /// `.notFound` (unregistered).
    public func unsubscribe(_ tokens: [String], from topic: String, in project: Project) async throws
        -> Committed<[BatchOutcome]>
    {
        try await writing { driver, log in
            let rows = try await driver.tokens(tokens, in: project.rowID)
            var removed: [Int64] = []
            if let topicID = try await driver.topicID(topic, in: project.rowID) {
                let registered = rows.values.filter { $0.state == .registered }.map(\.id)
                if !registered.isEmpty { removed = try await driver.deleteSubscriptions(registered, from: topicID) }
                try await driver.deleteTopicIfEmpty(topicID)
            }
            log.record(.unsubscribed(project: project.rowID, topic: topic, tokens: removed.map { UInt32($0) }.sorted()))
            return tokens.map { value in
                guard let row = rows[value] else { return .ok }
                return row.state == .registered ? .ok : .notFound
            }
        }
    }

    /// Subscribes one token, registering it when unknown.
    /// - Throws: `.subscriptionExists`, `.tokenNotFound` (unregistered), `.tooManyTopics`.
    /// Isolation: serialized per token.
    public func createSubscription(token: String, topic: String, topicLimit: Int, in project: Project) async throws
        -> Committed<SubscriptionInfo>
    {
        try await writing { driver, log in
            let now = EpochMilliseconds.now()
            let row = try await driver.registeringNew(token, in: project, at: now, log: log)
            guard row.state == .registered else { throw RegistryError.tokenNotFound }
            let (topicID, _) = try await driver.topicCreating(topic, in: project.rowID, at: now)
            guard try await driver.subscribed([row.id], to: topicID).isEmpty else {
                throw RegistryError.subscriptionExists
            }
            guard try await driver.topicCounts(of: [row.id])[row.id, default: 0] < topicLimit else {
                throw RegistryError.tooManyTopics(limit: topicLimit)
            }
            try await driver.insertSubscriptions([row.id], to: topicID, at: now)
            log.record(.subscribed(project: project.rowID, topic: topic, tokens: [UInt32(row.id)]))
            return SubscriptionInfo(token: token, topic: topic, createdAt: EpochMilliseconds.date(now))
        }
    }

    /// Whether there was a subscription to delete.
    public func deleteSubscription(token: String, topic: String, in project: Project) async throws -> Committed<Bool> {
        try await writing { driver, log in
            guard let row = try await driver.token(token, in: project.rowID),
                let topicID = try await driver.topicID(topic, in: project.rowID)
            else { return false }
            let deleted = try await !driver.deleteSubscriptions([row.id], from: topicID).isEmpty
            try await driver.deleteTopicIfEmpty(topicID)
            if deleted { log.record(.unsubscribed(project: project.rowID, topic: topic, tokens: [UInt32(row.id)])) }
            return deleted
        }
    }

    /// Makes `topics` (distinct, valid) exactly the token's topics, registering an unknown token.
    /// - Throws: `.tokenNotFound` (unregistered), `.tooManyTopics`.
    /// Isolation: serialized per token.
    public func setTopics(_ topics: [String], ofToken token: String, topicLimit: Int, in project: Project) async throws
        -> Committed<TopicChanges>
    {
        try await writing { driver, log in
            let now = EpochMilliseconds.now()
            let row = try await driver.registeringNew(token, in: project, at: now, log: log)
            guard row.state == .registered else { throw RegistryError.tokenNotFound }
            guard topics.count <= topicLimit else { throw RegistryError.tooManyTopics(limit: topicLimit) }
            var current: [String: Int64] = [:]
            for topic in try await driver.topics(ofToken: row.id) { current[topic.name] = topic.id }
            let wanted = Set(topics)
            let added = wanted.subtracting(current.keys)
            let removed = Set(current.keys).subtracting(wanted)
            // Topic rows are held in name order, whatever each needs, so that two writes changing
            // the same topics the other way round never wait on each other.
            for name in added.union(removed).sorted() {
                if let id = current[name], removed.contains(name) {
                    _ = try await driver.deleteSubscriptions([row.id], from: id)
                    try await driver.deleteTopicIfEmpty(id)
                    log.record(.unsubscribed(project: project.rowID, topic: name, tokens: [UInt32(row.id)]))
                } else {
                    let (id, _) = try await driver.topicCreating(name, in: project.rowID, at: now)
                    try await driver.insertSubscriptions([row.id], to: id, at: now)
                    log.record(.subscribed(project: project.rowID, topic: name, tokens: [UInt32(row.id)]))
                }
            }
            return TopicChanges(added: added.sorted(), removed: removed.sorted())
        }
    }
}
