import Logging
import PostgresNIO
import Registry

/// The registry's tables on PostgreSQL, migration by migration, as `RegistrySQLite`'s `Migrations`
/// are for SQLite: the same tables, columns and meanings (times are milliseconds since 1970, token
/// id lists little-endian `UInt32`s), so `fcm-registry copy` moves rows as they are.
///
/// Several servers may start at once: the migrator holds a session advisory lock while it reads
/// which migrations ran and applies the rest, each in a transaction of its own. A migration is
/// never edited once it has landed; a change is a new one.
enum PostgresMigrations {
    /// The lock every migrator takes: one number, the same for every server of every version.
    static let advisoryLock: Int64 = 0x6663_6D72_6567_0001  // "fcmreg" 1

    /// `(name, statements)`, in order.
    static let all: [(name: String, statements: [String])] = [
        ("v1-registry", v1), ("v2-concurrent-writes", v2), ("v3-mirror", v3), ("v4-send-budget", v4),
        ("v6-idempotency", v6),
        ("v7-webhooks", v7),
        ("v8-minute-stats", v8),
        ("v9-channel-settings", v9),
        ("v10-relay-error-time", v10),
        ("v11-message-cancel", v11),
        ("v13-key-scopes", v13),
        ("v14-service-account-scopes", v14),
        ("v12-webhook-fairness", v12),
        ("v15-audit-log", v15),
        ("v16-token-attributes", v16),
        ("v17-token-policy", v17),
        ("v18-skipped-stale", v18),
        ("v19-attribute-feed", v19),
    ]

    /// Applies the migrations `connection`'s database lacks (those up to `last` only, when
    /// given: a database of an earlier version, for a test of the migration after it).
    /// - Returns: the names applied now.
    static func migrate(_ connection: PostgresConnection, logger: Logger, upTo last: String? = nil) async throws
        -> [String]
    {
        try await connection.run("SELECT pg_advisory_lock(\(advisoryLock))")
        do {
            try await connection.run(
                """
                CREATE TABLE IF NOT EXISTS "schemaMigration" (name text PRIMARY KEY, "appliedAt" bigint NOT NULL)
                """)
            var applied: Set<String> = []
            for try await name in try await connection.query(#"SELECT name FROM "schemaMigration""#, logger: logger)
                .decode(String.self)
            {
                applied.insert(name)
            }
            var now: [String] = []
            let through = last.map { last in all.firstIndex { $0.name == last } }
            precondition(through != .some(nil), "no migration is named \(last ?? "")")
            let wanted = through.flatMap { $0 }.map { all[...$0] } ?? all[...]
            for migration in wanted where !applied.contains(migration.name) {
                let name = migration.name
                let statements = migration.statements
                try await connection.withTransaction(logger: logger) { transaction in
                    for statement in statements {
                        try await transaction.run(PostgresQuery(unsafeSQL: statement))
                    }
                    try await transaction.run(
                        #"INSERT INTO "schemaMigration" (name, "appliedAt") VALUES (\#(name), \#(EpochMilliseconds.now()))"#)
                }
                now.append(name)
            }
            _ = try await rebaseFeed(connection, logger: logger)
            try await connection.run("SELECT pg_advisory_unlock(\(advisoryLock))")
            return now
        } catch {
            try? await connection.run("SELECT pg_advisory_unlock(\(advisoryLock))")
            throw error
        }
    }

    /// Starts the change feed again when its positions lie ahead of this cluster's transaction
    /// ids: the database came from another cluster (a `pg_dump` restored elsewhere, a logical
    /// replica), whose ids ran higher, and every new entry would fall below the pruning mark.
    /// The entries go, the mark moves just below the oldest running transaction, and every
    /// server and checkpoint reloads its index from the tables.
    /// - Returns: whether the feed was started again.
    static func rebaseFeed(_ connection: PostgresConnection, logger: Logger) async throws -> Bool {
        let ahead = try await connection.one(
            #"""
            SELECT GREATEST((SELECT "prunedThrough" FROM "audienceFeed" WHERE id = 1),
                            COALESCE((SELECT MAX(position) FROM "audienceChange"), 0))
                   >= pg_snapshot_xmax(pg_current_snapshot())::text::bigint << 20
            """#, as: Bool.self)
        guard ahead else { return false }
        try await connection.withTransaction(logger: logger) { transaction in
            try await transaction.run(#"DELETE FROM "audienceChange""#)
            let frontier = try await transaction.frontier()
            try await transaction.run(#"UPDATE "audienceFeed" SET "prunedThrough" = \#(frontier - 1)"#)
        }
        logger.notice("the change feed came from another PostgreSQL cluster (a restored dump?): started again, audiences reload from the tables")
        return true
    }
}
