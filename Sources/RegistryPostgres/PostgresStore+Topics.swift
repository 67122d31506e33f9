import AudienceEngine
import Foundation
import PostgresNIO
import Registry

/// Topics and subscriptions. Across servers, two rules must hold: a token's topics stay under the
/// limit (its row is locked before counting, tokens in sorted order so that two batches never wait
/// on each other), and a topic exists while it has subscribers (a writer holds the topic row with
/// `FOR KEY SHARE` while it subscribes; removing an empty topic takes `FOR UPDATE` and looks again,
/// so it never removes a topic another transaction is subscribing to).
extension PostgresStore {
    public func subscription(token: String, topic: String, in project: Project) async throws -> SubscriptionInfo? {
        try await database.withConnection { connection in
            for try await createdAt in try await connection.query(
                #"""
                SELECT subscription."createdAt" FROM subscription
                JOIN token ON token.id = subscription."tokenId"
                JOIN topic ON topic.id = subscription."topicId"
                WHERE token."projectId" = \#(project.rowID) AND token.value = \#(token)
                  AND topic."projectId" = \#(project.rowID) AND topic.name = \#(topic)
                """#, logger: .silent
            ).decode(Int64.self) {
                return SubscriptionInfo(token: token, topic: topic, createdAt: EpochMilliseconds.date(createdAt))
            }
            return nil
        }
    }

    public func topicCreationTimes(_ names: [String], in project: Project) async throws -> [String: Date] {
        guard !names.isEmpty else { return [:] }
        return try await database.withConnection { connection in
            var times: [String: Date] = [:]
            for try await (name, createdAt) in try await connection.query(
                #"SELECT name, "createdAt" FROM topic WHERE "projectId" = \#(project.rowID) AND name = ANY(\#(names))"#,
                logger: .silent
            ).decode((String, Int64).self) { times[name] = EpochMilliseconds.date(createdAt) }
            return times
        }
    }
}

extension PostgresConnection {
    /// `lockedTokensRegistering(_:in:now:log:)` by the project's row id, the new rows marked `isNew`.
    func lockedTokensRegistering(_ values: [String], in project: Int64, now: Int64) async throws
        -> [String: PostgresTokenRow]
    {
        let sorted = Array(Set(values)).sorted()
        var rows: [String: PostgresTokenRow] = [:]
        // One round trip for the usual case: the new tokens inserted, the known ones locked. The
        // lock reads the statement's snapshot, so a token another write inserted meanwhile (the
        // insert waited for it, then did nothing) is in neither part: those are locked after.
        // The values travel once, and come back as their place in `sorted`.
        for try await (place, id, state, isNew) in try await query(
            #"""
            WITH input AS (
              SELECT value, place FROM unnest(\#(sorted)::text[]) WITH ORDINALITY AS input(value, place)
            ), inserted AS (
              INSERT INTO token ("projectId", value, state, "createdAt", "updatedAt", "lastSeenAt")
              SELECT \#(project), value, 'registered', \#(now), \#(now), \#(now) FROM input ORDER BY place
              ON CONFLICT ("projectId", value) DO NOTHING RETURNING id, value
            ), known AS (
              SELECT token.id, token.state, input.place FROM token JOIN input USING (value)
              WHERE token."projectId" = \#(project)
              ORDER BY token.value FOR NO KEY UPDATE OF token
            )
            SELECT input.place, inserted.id, 'registered', true FROM inserted JOIN input USING (value)
            UNION ALL SELECT place, id, state, false FROM known
            """#, logger: .silent
        ).decode((Int64, Int32, String, Bool).self) {
            rows[sorted[Int(place) - 1]] = PostgresTokenRow(
                id: id, state: TokenState(rawValue: state) ?? .registered, isNew: isNew)
        }
        if rows.count < sorted.count {
            let missed = sorted.filter { rows[$0] == nil }
            for (value, row) in try await lockedTokens(missed, in: project) { rows[value] = row }
        }
        return rows
    }

    func lockedTokens(_ values: [String], in project: Int64) async throws -> [String: PostgresTokenRow] {
        var rows: [String: PostgresTokenRow] = [:]
        for try await (id, value, state) in try await query(
            #"""
            SELECT id, value, state FROM token
            WHERE "projectId" = \#(project) AND value = ANY(\#(Array(Set(values)).sorted()))
            ORDER BY value FOR NO KEY UPDATE
            """#, logger: .silent
        ).decode((Int32, String, String).self) {
            rows[value] = PostgresTokenRow(id: id, state: TokenState(rawValue: state) ?? .registered, isNew: false)
        }
        return rows
    }

    /// The topic's id, creating the topic first (subscribing to a topic that does not exist creates
    /// it, as in FCM), held with `FOR KEY SHARE` until the transaction ends so that no one removes
    /// it as empty meanwhile. `created` when this transaction made it.
    ///
    /// Lock order, in every write: token rows (sorted), then the topic row. Subscribers hold the
    /// topic with `FOR KEY SHARE` and never ask for more; only a write that removes subscriptions
    /// takes `FOR UPDATE` (in `removeTopicIfEmpty`), so no two transactions wait on each other.
    func heldTopic(_ name: String, in project: Project, now: Int64) async throws -> (id: Int64, created: Bool) {
        try await heldTopic(name, inProject: project.rowID, createdAt: now)
    }

    /// `heldTopic(_:in:now:)` by the project's row id, for the importer.
    func heldTopic(_ name: String, inProject project: Int64, createdAt: Int64) async throws -> (id: Int64, created: Bool) {
        // A topic removed between the insert and the lock is created again: at most a few rounds.
        for _ in 0..<8 {
            for try await id in try await query(
                #"""
                INSERT INTO topic ("projectId", name, "createdAt") VALUES (\#(project), \#(name), \#(createdAt))
                ON CONFLICT ("projectId", name) DO NOTHING RETURNING id
                """#, logger: .silent
            ).decode(Int64.self) { return (id, true) }
            for try await id in try await query(
                #"SELECT id FROM topic WHERE "projectId" = \#(project) AND name = \#(name) FOR KEY SHARE"#,
                logger: .silent
            ).decode(Int64.self) { return (id, false) }
        }
        throw PostgresStoreError("topic \(name) was removed and created again too many times")
    }

    /// A topic exists while it has subscribers: removes it when it has none, after waiting for
    /// every transaction that holds it to subscribe.
    func removeTopicIfEmpty(_ id: Int64) async throws {
        guard try await exists(#"SELECT 1 FROM topic WHERE id = \#(id) FOR UPDATE"#) else { return }
        try await run(
            #"DELETE FROM topic WHERE id = \#(id) AND NOT EXISTS (SELECT 1 FROM subscription WHERE "topicId" = \#(id))"#)
    }
}
