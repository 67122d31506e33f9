import AudienceEngine
import Foundation
import PostgresNIO
import Registry

/// The change feed's writing side on PostgreSQL: the `audienceChange` rows a write adds in its
/// own transaction, and the doorbell rung once per transaction.
enum PostgresFeed {
    /// The NOTIFY channel every server listens on. The payload is empty: PostgreSQL folds identical
    /// notifications of one transaction into one, so a request rings once however much it wrote,
    /// and NOTIFY's commit-time lock is taken once per transaction, never per change.
    static let channel = "fcm_registry_feed"

    /// Inserts `changes` in order, and rings the doorbell; returns them with their positions.
    ///
    /// A sequence would not do: ids are taken before commit, so a change could commit after one
    /// with a higher id, and a reader would apply the two in the wrong order. Positions are taken
    /// from the one `audienceFeed` row instead, as the write's last step: its lock is held until
    /// the write commits, so positions are handed out in commit order and without gaps (a write
    /// that rolls back rolls its positions back). Only writes that change an audience take it,
    /// for the span of their commit, as NOTIFY's own commit lock already does.
    static func insert(
        _ changes: [AudienceChange], _ connection: PostgresConnection, now: Int64, retention: Int
    ) async throws -> [FeedEntry] {
        guard !changes.isEmpty else { return [] }
        let count = Int64(changes.count)
        var projects: [Int64] = [], kinds: [String] = [], topics: [String] = [], tokenLists: [ByteBuffer] = []
        for change in changes {
            let (project, kind, topic, tokens) = columns(of: change)
            projects.append(project)
            kinds.append(kind)
            topics.append(topic ?? "")
            tokenLists.append(ByteBuffer(bytes: TokenIDList.encode(tokens)))
        }
        // One statement, one round trip: the counter, every change, and the doorbell. The
        // counter's lock is what makes positions commit-ordered, so the span it is held, this
        // statement and the commit, is the one part of a write no other write overlaps.
        let last = try await connection.one(
            #"""
            WITH counter AS (
              UPDATE "audienceFeed" SET next = next + \#(count) WHERE id = 1 RETURNING next
            ), inserted AS (
              INSERT INTO "audienceChange" (position, "projectId", kind, topic, "tokenIds", "createdAt")
              SELECT counter.next - \#(count) + change.place, change.project, change.kind,
                     NULLIF(change.topic, ''), change.tokens, \#(now)
              FROM counter,
                   unnest(\#(projects)::bigint[], \#(kinds)::text[], \#(topics)::text[], \#(tokenLists)::bytea[])
                     WITH ORDINALITY AS change(project, kind, topic, tokens, place)
            )
            SELECT counter.next FROM counter, pg_notify(\#(channel), '') AS rung
            """#, as: Int64.self)
        let entries = changes.enumerated().map { place, change in
            FeedEntry(id: last - count + 1 + Int64(place), change: change)
        }
        // Keep the newest `retention` entries: pruned a thousand positions at a time, by the write
        // that crosses a thousand, under the same lock.
        if last / 1000 != (last - count) / 1000, last > Int64(retention) {
            let cut = last - Int64(retention)
            try await connection.run(
                #"""
                WITH pruned AS (DELETE FROM "audienceChange" WHERE position <= \#(cut))
                UPDATE "audienceFeed" SET "prunedThrough" = GREATEST("prunedThrough", \#(cut)) WHERE id = 1
                """#)
        }
        return entries
    }

    static func columns(of change: AudienceChange) -> (Int64, String, String?, [UInt32]) {
        switch change {
        case .subscribed(let project, let topic, let tokens): (project, "subscribed", topic, tokens)
        case .unsubscribed(let project, let topic, let tokens): (project, "unsubscribed", topic, tokens)
        case .registered(let project, let tokens): (project, "registered", nil, tokens)
        case .unregistered(let project, let tokens): (project, "unregistered", nil, tokens)
        case .reset: (0, "reset", nil, [])
        }
    }
}

extension PostgresStore {
    /// Runs `body` as one all-or-nothing write; what it records in the log goes to the change
    /// feed in the same transaction, and comes back with its value.
    func committing<Value: Sendable>(
        _ body: @Sendable (PostgresConnection, ChangeLog) async throws -> Value,
        onUniqueViolation: (() -> any Error)? = nil
    ) async throws -> Committed<Value> {
        try await transaction({ connection in
            let log = ChangeLog()
            let value = try await body(connection, log)
            let entries = try await PostgresFeed.insert(
                log.changes, connection, now: EpochMilliseconds.now(), retention: feedRetention)
            return Committed(value, changes: entries)
        }, onUniqueViolation: onUniqueViolation)
    }
}

/// A token's row as writes need it.
struct PostgresTokenRow {
    var id: Int32
    var state: TokenState
    /// Registered by this very write.
    var isNew: Bool
}

extension PostgresConnection {
    /// The token's row, locked until the transaction ends (`FOR NO KEY UPDATE`: writers on the token
    /// queue, while foreign-key checks of rows naming it, an outbox delivery for one, do not): every rule that counts
    /// a token's topics or groups and then writes holds across servers, because a second writer
    /// on the same token waits here. `nil` when the project does not know it.
    func lockedToken(_ value: String, in project: Project) async throws -> PostgresTokenRow? {
        for try await (id, state) in try await query(
            #"SELECT id, state FROM token WHERE "projectId" = \#(project.rowID) AND value = \#(value) FOR NO KEY UPDATE"#,
            logger: .silent
        ).decode((Int32, String).self) {
            return PostgresTokenRow(id: id, state: TokenState(rawValue: state) ?? .registered, isNew: false)
        }
        return nil
    }

    /// The token's row, locked, registering the token first if the project has never seen it.
    func lockedTokenRegistering(_ value: String, in project: Project, now: Int64, log: ChangeLog) async throws
        -> PostgresTokenRow
    {
        // Insert first: a new token costs one statement, a known one two. A concurrent insert of
        // the same token waits on the unique index, then does nothing.
        for try await id in try await query(
            #"""
            INSERT INTO token ("projectId", value, state, "createdAt", "updatedAt")
            VALUES (\#(project.rowID), \#(value), 'registered', \#(now), \#(now))
            ON CONFLICT ("projectId", value) DO NOTHING RETURNING id
            """#, logger: .silent
        ).decode(Int32.self) {
            log.record(.registered(project: project.rowID, tokens: [UInt32(id)]))
            return PostgresTokenRow(id: id, state: .registered, isNew: true)
        }
        guard let row = try await lockedToken(value, in: project) else {
            throw PostgresStoreError("token \(value.count)-character value neither inserted nor found")
        }
        return row
    }
}
