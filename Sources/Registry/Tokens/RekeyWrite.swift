import AudienceEngine

/// Moving a device to a new registration id: the rule, once, over any store's statements
/// (`RegistryWriteDriver`), with the change-feed entries it places.
extension RegistryWriting {
    /// Moves a device to a new registration id (a token to its Firebase installation id), all at
    /// once: `to` (registered if new, or again if unregistered) joins every topic and group of
    /// `from`, merged with its own, and `from` is unregistered.
    /// - Throws: `.tokenNotFound` (`from` unknown or unregistered), `.tooManyTopics`, `.groupFull`
    ///   (a limit `to` would pass once merged); nothing is written then.
    /// Isolation: serialized per token (both) and per group either belongs to.
    public func rekey(_ from: String, to: String, topicLimit: Int, memberLimit: Int, in project: Project) async throws
        -> Committed<Rekeyed>
    {
        try await writing { driver, log in
            let now = EpochMilliseconds.now()
            let (sourceRow, targetRow) = try await driver.rekeyRows(from: from, to: to, in: project.rowID, at: now)
            guard let source = sourceRow, !source.isNew, source.state == .registered else {
                throw RegistryError.tokenNotFound
            }
            if targetRow.isNew {
                log.record(.registered(project: project.rowID, tokens: [UInt32(targetRow.id)]))
                log.record(
                    .seen(project: project.rowID, tokens: [UInt32(targetRow.id)], day: SeenDay.of(milliseconds: now)))
            }
            if targetRow.state == .unregistered {
                try await driver.setState(.registered, ofToken: targetRow.id, at: now)
                log.record(.registered(project: project.rowID, tokens: [UInt32(targetRow.id)]))
            }
            let (sourceID, targetID) = (UInt32(source.id), UInt32(targetRow.id))
            // Topics: the source's become the target's too, then the source leaves them. No topic of
            // the source can go meanwhile: the source, held here, is in each.
            for topic in try await driver.topics(ofToken: source.id) {
                if try await driver.joinTopic(topic.id, token: targetRow.id, at: now) {
                    log.record(.subscribed(project: project.rowID, topic: topic.name, tokens: [targetID]))
                }
                log.record(.unsubscribed(project: project.rowID, topic: topic.name, tokens: [sourceID]))
            }
            try await driver.deleteSubscriptions(ofToken: source.id)
            let topicCount = try await driver.topicCounts(of: [targetRow.id])[targetRow.id, default: 0]
            guard topicCount <= topicLimit else { throw RegistryError.tooManyTopics(limit: topicLimit) }
            // Groups: the target takes the source's place in each.
            for group in try await driver.leaveGroups(source.id) {
                try await driver.joinGroup(group, token: targetRow.id, at: now)
                guard try await driver.memberCount(of: group) <= memberLimit else {
                    throw RegistryError.groupFull(limit: memberLimit)
                }
            }
            try await driver.setState(.unregistered, ofToken: source.id, at: now)
            log.record(.unregistered(project: project.rowID, tokens: [sourceID]))
            let topics = try await driver.topics(ofToken: targetRow.id).map(\.name)
            let groups = try await driver.groupNames(ofToken: targetRow.id)
            return Rekeyed(from: from, to: to, topics: topics, groups: groups)
        }
    }
}
