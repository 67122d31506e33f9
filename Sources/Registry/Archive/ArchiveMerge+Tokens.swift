import AudienceEngine
import Foundation

/// Topics and tokens: the token records of a batch are written a page at a time.
extension ArchiveMerge {
    /// A token's row after the merge: whether this batch inserted it, and whether it is registered.
    typealias MergedToken = (id: Int64, isNew: Bool, registered: Bool)

    /// The topic's id, created if missing and cached for the batch.
    func topicID(_ name: String, in project: Int64, createdAt: Date) async throws -> Int64 {
        if let id = topicIDs[project]?[name] { return id }
        let (id, created) = try await driver.topic(
            name, in: project, createdAt: EpochMilliseconds.milliseconds(createdAt))
        if created { tally.topics += 1 }
        topicIDs[project, default: [:]][name] = id
        return id
    }

    /// Writes the waiting token records, a project at a time.
    func writeTokens() async throws {
        guard !pendingTokens.isEmpty else { return }
        let batch = pendingTokens
        pendingTokens = []
        var byProject: [Int64: [(record: TokenArchive, line: Int)]] = [:]
        for item in batch {
            do {
                byProject[try await projectRowID(item.record.project), default: []].append(item)
            } catch let problem as ArchiveProblem {
                throw ImportError(line: item.line, problem: problem.message)
            }
        }
        for (project, items) in byProject.sorted(by: { $0.key < $1.key }) {
            try await writeTokens(items, in: project)
        }
    }

    private func writeTokens(_ items: [(record: TokenArchive, line: Int)], in project: Int64) async throws {
        let rows = try await merged(
            items.map {
                NewToken(
                    value: $0.record.token, state: $0.record.state,
                    createdAt: EpochMilliseconds.milliseconds($0.record.createdAt),
                    updatedAt: EpochMilliseconds.milliseconds($0.record.updatedAt),
                    lastSeenAt: $0.record.lastSeenAt.map(EpochMilliseconds.milliseconds),
                    attributes: $0.record.attributes)
            }, in: project)
        // Subscriptions of registered tokens (a dead token has no topics).
        var topicNames: [Int64: String] = [:]
        var subscriptions: [NewSubscription] = []
        var lines: [Int64: Int] = [:]
        for (record, line) in items {
            guard let row = rows[record.token], row.registered else { continue }
            lines[row.id] = lines[row.id] ?? line
            for topic in record.topics {
                let id: Int64
                do {
                    id = try await topicID(topic.name, in: project, createdAt: topic.since)
                } catch let problem as ArchiveProblem {
                    throw ImportError(line: line, problem: problem.message)
                }
                topicNames[id] = topic.name
                subscriptions.append(
                    NewSubscription(topic: id, token: row.id, since: EpochMilliseconds.milliseconds(topic.since)))
            }
        }
        guard !subscriptions.isEmpty else { return }
        var added: [Int64: Int] = [:]
        for (topic, token) in try await driver.subscribe(subscriptions) {
            subscribed[project, default: [:]][topicNames[topic] ?? "", default: []].append(UInt32(token))
            added[token, default: 0] += 1
        }
        tally.subscriptions += added.values.reduce(0, +)
        // The topic limit, for tokens that were here before and gained topics (the file's own
        // records were checked against it).
        let grown = rows.values.filter { !$0.isNew && added[$0.id] != nil }.map(\.id)
        guard !grown.isEmpty else { return }
        let over = try await driver.tokens(grown, withMoreTopicsThan: limits.topicsPerToken)
        if let first = over.compactMap({ lines[$0] }).min() {
            throw ImportError(
                line: first, problem: "the token would have more than \(limits.topicsPerToken) topics here")
        }
    }

    /// The rows of these tokens here, inserting the new ones as the file has them. A registered
    /// token of the file registers an unregistered one here again only when the file saw it
    /// later than this database did: an old export does not bring back a token reported dead
    /// since. An unregistered one of the file changes nothing that is here.
    func merged(_ tokens: [NewToken], in project: Int64) async throws -> [String: MergedToken] {
        var rows: [String: MergedToken] = [:]
        guard !tokens.isEmpty else { return rows }
        for (value, row) in try await driver.insertTokens(tokens, in: project) {
            rows[value] = (row.id, true, row.state == .registered)
        }
        tally.tokens += rows.count
        log.record(
            .registered(project: project, tokens: rows.values.filter(\.registered).map { UInt32($0.id) }.sorted()))
        let inserted = tokens.compactMap { token in rows[token.value].map { (UInt32($0.id), token) } }
        log.record(
            .described(
                project: project, tokens: inserted.map(\.0),
                values: inserted.map { _, token in
                    IndexedAttributes(
                        token.attributes,
                        lastSeenAt: EpochMilliseconds.date(token.lastSeenAt ?? token.updatedAt))
                }))
        let known = Array(Set(tokens.map(\.value).filter { rows[$0] == nil }))
        guard !known.isEmpty else { return rows }
        let found = try await driver.tokens(known, in: project)
        for token in tokens where rows[token.value] == nil {
            guard let row = found[token.value] else { continue }
            if row.state != .unregistered {
                rows[token.value] = (row.id, false, true)
            } else if token.state == .registered, token.updatedAt > row.updatedAt {
                try await driver.reregister(row.id, at: token.updatedAt)
                log.record(.registered(project: project, tokens: [UInt32(row.id)]))
                rows[token.value] = (row.id, false, true)
            } else {
                rows[token.value] = (row.id, false, false)
            }
        }
        return rows
    }
}
