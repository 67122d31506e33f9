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

    /// Bits of a position below the transaction id: a transaction writes at most 2^20 changes.
    static let placeBits: Int64 = 20

    /// Inserts `changes` in order, and rings the doorbell; returns them with their positions:
    /// `transaction id << 20 | place`. The feed is read in position order, and every transaction
    /// below the oldest one running has ended, so a reader knows which positions are final.
    static func insert(_ changes: [AudienceChange], _ connection: PostgresConnection, now: Int64) async throws
        -> [FeedEntry]
    {
        guard !changes.isEmpty else { return [] }
        guard changes.count < 1 << placeBits else {
            throw PostgresStoreError("a write of \(changes.count) audience changes: at most \((1 << placeBits) - 1) are kept")
        }
        let transaction = try await connection.one("SELECT pg_current_xact_id()::text::bigint", as: Int64.self)
        var entries: [FeedEntry] = []
        for (place, change) in changes.enumerated() {
            let position = transaction << placeBits | Int64(place)
            let (project, kind, topic, tokens) = columns(of: change)
            try await connection.run(
                #"""
                INSERT INTO "audienceChange" (position, "projectId", kind, topic, "tokenIds", "createdAt")
                VALUES (\#(position), \#(project), \#(kind), \#(topic), \#(Data(TokenIDList.encode(tokens))), \#(now))
                """#)
            entries.append(FeedEntry(id: position, change: change))
        }
        try await connection.run("SELECT pg_notify(\(channel), '')")
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
            let entries = try await PostgresFeed.insert(log.changes, connection, now: EpochMilliseconds.now())
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
    /// The token's row, locked until the transaction ends (`FOR UPDATE`): every rule that counts
    /// a token's topics or groups and then writes holds across servers, because a second writer
    /// on the same token waits here. `nil` when the project does not know it.
    func lockedToken(_ value: String, in project: Project) async throws -> PostgresTokenRow? {
        for try await (id, state) in try await query(
            #"SELECT id, state FROM token WHERE "projectId" = \#(project.rowID) AND value = \#(value) FOR UPDATE"#,
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
