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

    /// The schema of SQLite's migrations up to v7, in PostgreSQL's types. Quoted names keep the
    /// camelCase the SQLite schema and every query use.
    static let v1: [String] = [
        """
        CREATE TABLE project (
          id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
          "projectId" text NOT NULL UNIQUE,
          "senderId" text NOT NULL UNIQUE,
          "createdAt" bigint NOT NULL
        )
        """,
        """
        CREATE TABLE "serverKey" (
          id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
          "projectId" bigint NOT NULL REFERENCES project(id) ON DELETE CASCADE,
          "keyHash" bytea NOT NULL UNIQUE,
          "createdAt" bigint NOT NULL,
          "revokedAt" bigint
        )
        """,
        #"CREATE INDEX "serverKey_projectId" ON "serverKey"("projectId")"#,
        """
        CREATE TABLE secret (
          name text PRIMARY KEY,
          value bytea NOT NULL
        )
        """,
        // Token ids index the audience bitmaps: 32 bits, as SQLite's rowids stay in practice.
        """
        CREATE TABLE token (
          id integer GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
          "projectId" bigint NOT NULL REFERENCES project(id) ON DELETE CASCADE,
          value text NOT NULL,
          state text NOT NULL DEFAULT 'registered' CHECK (state IN ('registered', 'unregistered')),
          "createdAt" bigint NOT NULL,
          "updatedAt" bigint NOT NULL,
          UNIQUE ("projectId", value)
        )
        """,
        """
        CREATE TABLE "deviceGroup" (
          id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
          "projectId" bigint NOT NULL REFERENCES project(id) ON DELETE CASCADE,
          name text COLLATE "C" NOT NULL,
          "createdAt" bigint NOT NULL,
          UNIQUE ("projectId", name)
        )
        """,
        """
        CREATE TABLE "groupMember" (
          "groupId" bigint NOT NULL REFERENCES "deviceGroup"(id) ON DELETE CASCADE,
          "tokenId" integer NOT NULL REFERENCES token(id) ON DELETE CASCADE,
          "addedAt" bigint NOT NULL,
          PRIMARY KEY ("groupId", "tokenId")
        )
        """,
        #"CREATE INDEX "groupMember_tokenId" ON "groupMember"("tokenId")"#,
        """
        CREATE TABLE topic (
          id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
          "projectId" bigint NOT NULL REFERENCES project(id) ON DELETE CASCADE,
          name text COLLATE "C" NOT NULL,
          "createdAt" bigint NOT NULL,
          UNIQUE ("projectId", name)
        )
        """,
        """
        CREATE TABLE subscription (
          "topicId" bigint NOT NULL REFERENCES topic(id) ON DELETE CASCADE,
          "tokenId" integer NOT NULL REFERENCES token(id) ON DELETE CASCADE,
          "createdAt" bigint NOT NULL,
          PRIMARY KEY ("topicId", "tokenId")
        )
        """,
        #"CREATE INDEX "subscription_tokenId" ON subscription("tokenId")"#,
        // The change feed (v2 replaces its counter). Positions come from `audienceFeed.next`, updated by each write as its last
        // step and locked until it commits: positions are handed out in commit order, with no gap,
        // so a reader's watermark is all it needs (`PostgresFeed`).
        """
        CREATE TABLE "audienceChange" (
          position bigint PRIMARY KEY,
          "projectId" bigint NOT NULL,
          kind text NOT NULL CHECK (kind IN ('subscribed', 'unsubscribed', 'registered', 'unregistered', 'reset')),
          topic text,
          "tokenIds" bytea NOT NULL,
          "createdAt" bigint NOT NULL
        )
        """,
        """
        CREATE TABLE "audienceFeed" (
          id integer PRIMARY KEY CHECK (id = 1),
          "prunedThrough" bigint NOT NULL,
          next bigint NOT NULL
        )
        """,
        #"INSERT INTO "audienceFeed" (id, "prunedThrough", next) VALUES (1, 0, 0)"#,
        """
        CREATE TABLE message (
          id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
          "projectId" bigint NOT NULL REFERENCES project(id) ON DELETE CASCADE,
          "messageId" text NOT NULL,
          protocol text NOT NULL,
          target text NOT NULL,
          body text NOT NULL,
          "recipientCount" bigint NOT NULL,
          recipients bytea NOT NULL,
          bytes bigint NOT NULL,
          "receivedAt" bigint NOT NULL
        )
        """,
        #"CREATE INDEX "message_projectId" ON message("projectId", id)"#,
        #"CREATE INDEX "message_messageId" ON message("projectId", "messageId")"#,
        """
        CREATE TABLE "messageLog" (
          "projectId" bigint PRIMARY KEY REFERENCES project(id) ON DELETE CASCADE,
          entries bigint NOT NULL,
          bytes bigint NOT NULL
        )
        """,
        """
        CREATE TABLE "serviceAccount" (
          id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
          "projectId" bigint NOT NULL REFERENCES project(id) ON DELETE CASCADE,
          "keyId" text NOT NULL UNIQUE,
          "clientEmail" text NOT NULL,
          "clientId" text NOT NULL,
          "publicKey" text NOT NULL,
          "createdAt" bigint NOT NULL,
          "revokedAt" bigint,
          "tokenUri" text
        )
        """,
        #"CREATE INDEX "serviceAccount_projectId" ON "serviceAccount"("projectId")"#,
        """
        CREATE TABLE "usedAssertion" (
          hash bytea PRIMARY KEY,
          "firstUsedAt" bigint NOT NULL,
          "expiresAt" bigint NOT NULL
        )
        """,
        #"CREATE INDEX "usedAssertion_expiresAt" ON "usedAssertion"("expiresAt")"#,
        """
        CREATE TABLE "messageRecipientChunk" (
          "projectId" bigint NOT NULL,
          chunk bigint NOT NULL,
          "messageId" bigint NOT NULL REFERENCES message(id) ON DELETE CASCADE,
          "tokenIds" bytea NOT NULL,
          PRIMARY KEY ("projectId", chunk, "messageId")
        )
        """,
        #"CREATE INDEX "messageRecipientChunk_messageId" ON "messageRecipientChunk"("messageId")"#,
        """
        CREATE TABLE keyring (
          id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
          "projectId" bigint NOT NULL REFERENCES project(id) ON DELETE CASCADE,
          fingerprint text NOT NULL,
          secret bytea NOT NULL,
          "sealedFor" bigint NOT NULL,
          "importedAt" bigint NOT NULL,
          UNIQUE ("projectId", fingerprint)
        )
        """,
        """
        CREATE TABLE "keyringGroup" (
          "keyringId" bigint NOT NULL REFERENCES keyring(id) ON DELETE CASCADE,
          "sourceGroupId" bigint NOT NULL,
          "groupId" bigint REFERENCES "deviceGroup"(id) ON DELETE SET NULL,
          PRIMARY KEY ("keyringId", "sourceGroupId")
        )
        """,
        #"CREATE INDEX "keyringGroup_groupId" ON "keyringGroup"("groupId")"#,
        """
        CREATE TABLE "importedKey" (
          "projectId" bigint NOT NULL REFERENCES project(id) ON DELETE CASCADE,
          "notificationKey" text NOT NULL,
          "groupId" bigint REFERENCES "deviceGroup"(id) ON DELETE SET NULL,
          "importedAt" bigint NOT NULL,
          PRIMARY KEY ("projectId", "notificationKey")
        )
        """,
        #"CREATE INDEX "importedKey_groupId" ON "importedKey"("groupId")"#,
        """
        CREATE TABLE relay (
          "projectId" bigint PRIMARY KEY REFERENCES project(id) ON DELETE CASCADE,
          "firebaseProjectId" text NOT NULL,
          "clientEmail" text NOT NULL,
          "privateKeyId" text,
          "privateKey" text NOT NULL,
          "tokenUri" text NOT NULL,
          upstream text NOT NULL,
          "pausedUntil" bigint,
          "lastError" text,
          delivered bigint NOT NULL DEFAULT 0,
          failed bigint NOT NULL DEFAULT 0,
          pruned bigint NOT NULL DEFAULT 0,
          "createdAt" bigint NOT NULL
        )
        """,
        """
        CREATE TABLE outbox (
          "messageId" bigint PRIMARY KEY REFERENCES message(id) ON DELETE CASCADE,
          "projectId" bigint NOT NULL REFERENCES project(id) ON DELETE CASCADE,
          template text NOT NULL,
          direct boolean NOT NULL,
          recipients bigint NOT NULL,
          delivered bigint NOT NULL DEFAULT 0,
          failed bigint NOT NULL DEFAULT 0,
          cursor bigint NOT NULL DEFAULT -1,
          walked bigint NOT NULL,
          "claimedBy" text,
          "leaseUntil" bigint,
          "notBefore" bigint NOT NULL,
          deadline bigint NOT NULL,
          "createdAt" bigint NOT NULL,
          "finishedAt" bigint
        )
        """,
        #"CREATE INDEX "outbox_open" ON outbox("notBefore") WHERE "finishedAt" IS NULL"#,
        #"CREATE INDEX "outbox_projectOpen" ON outbox("projectId") WHERE "finishedAt" IS NULL"#,
        """
        CREATE TABLE delivery (
          id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
          "messageId" bigint NOT NULL REFERENCES outbox("messageId") ON DELETE CASCADE,
          "tokenId" integer,
          token text,
          state text NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
          error text,
          attempts integer NOT NULL DEFAULT 0,
          "nextAttemptAt" bigint,
          "updatedAt" bigint NOT NULL,
          CHECK (("tokenId" IS NULL) <> (token IS NULL)),
          UNIQUE ("messageId", "tokenId"),
          UNIQUE ("messageId", token)
        )
        """,
        #"CREATE INDEX "delivery_due" ON delivery("messageId", "nextAttemptAt") WHERE state = 'pending'"#,
        #"CREATE INDEX "delivery_state" ON delivery("messageId", state, id)"#,
        // Upstream messages and receipts waiting for, or held by, an XMPP session of some server
        // (`UpstreamStore`): "heldBy" names the server, "heldUntil" ends its lease.
        """
        CREATE TABLE "upstreamMessage" (
          id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
          "projectId" bigint NOT NULL REFERENCES project(id) ON DELETE CASCADE,
          "messageId" text NOT NULL,
          json text NOT NULL,
          "isReceipt" boolean NOT NULL,
          "heldBy" text,
          "heldUntil" bigint,
          "createdAt" bigint NOT NULL
        )
        """,
        #"CREATE INDEX "upstreamMessage_project" ON "upstreamMessage"("projectId", id)"#,
        #"CREATE INDEX "upstreamMessage_heldBy" ON "upstreamMessage"("heldBy") WHERE "heldBy" IS NOT NULL"#,
        // Views for people with psql, as the SQLite schema has for sqlite3.
        """
        CREATE VIEW "groupMembers" AS
        SELECT project."projectId" AS project, "deviceGroup".name AS "groupName", token.value AS token,
               token.state AS "tokenState", to_timestamp("groupMember"."addedAt" / 1000.0) AS "addedAt"
        FROM "groupMember"
        JOIN "deviceGroup" ON "deviceGroup".id = "groupMember"."groupId"
        JOIN project ON project.id = "deviceGroup"."projectId"
        JOIN token ON token.id = "groupMember"."tokenId"
        """,
        """
        CREATE VIEW "topicSubscribers" AS
        SELECT project."projectId" AS project, topic.name AS topic, token.value AS token,
               to_timestamp(subscription."createdAt" / 1000.0) AS "subscribedAt"
        FROM subscription
        JOIN topic ON topic.id = subscription."topicId"
        JOIN project ON project.id = topic."projectId"
        JOIN token ON token.id = subscription."tokenId"
        """,
        """
        CREATE VIEW "topicSubscriberCounts" AS
        SELECT project."projectId" AS project, topic.name AS topic,
               (SELECT COUNT(*) FROM subscription WHERE subscription."topicId" = topic.id) AS subscribers
        FROM topic
        JOIN project ON project.id = topic."projectId"
        """,
        """
        CREATE VIEW "tokenTopics" AS
        SELECT project."projectId" AS project, token.value AS token, token.state AS "tokenState", topic.name AS topic,
               to_timestamp(subscription."createdAt" / 1000.0) AS "subscribedAt"
        FROM subscription
        JOIN token ON token.id = subscription."tokenId"
        JOIN topic ON topic.id = subscription."topicId"
        JOIN project ON project.id = token."projectId"
        """,
        """
        CREATE VIEW messages AS
        SELECT project."projectId" AS project, message."messageId", message.protocol, message.target,
               message."recipientCount", to_timestamp(message."receivedAt" / 1000.0) AS "receivedAt", message.body
        FROM message
        JOIN project ON project.id = message."projectId"
        """,
    ]

    /// The change feed without the shared counter, whose lock every write held through its commit,
    /// so that all servers together committed one write per WAL flush. Positions are now
    /// `transaction id << 20 | place`, and "replayOrder" (one number per write, taken as its last
    /// step, after every lock) orders what a reader reads (`PostgresFeed`). The counter's entries
    /// are dropped, and the pruning mark moved past every counter position, so a checkpoint from
    /// before reloads its index from the tables. Servers of the version before must be stopped
    /// before one of this version starts: the two do not share a feed.
    /// Each project's own rate toward FCM (`project relay --rate`), and the budget of the current
    /// second that every server on the database takes its sends from.
    /// Each project's webhooks and the queue of their events, as SQLite's "v13 webhooks".
    static let v7: [String] = [
        """
        CREATE TABLE webhook (
          id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
          "publicId" text NOT NULL UNIQUE,
          "projectId" bigint NOT NULL REFERENCES project(id) ON DELETE CASCADE,
          url text NOT NULL,
          events bigint NOT NULL,
          secret text NOT NULL,
          "previousSecret" text,
          "previousSecretUntil" bigint,
          backlog bigint NOT NULL DEFAULT 0,
          sent bigint NOT NULL DEFAULT 0,
          failed bigint NOT NULL DEFAULT 0,
          dropped bigint NOT NULL DEFAULT 0,
          "lastAttemptAt" bigint,
          "lastError" text,
          "failingSince" bigint,
          "disabledAt" bigint,
          "disabledReason" text,
          "createdAt" bigint NOT NULL
        )
        """,
        #"CREATE INDEX "webhook_project" ON webhook("projectId")"#,
        """
        CREATE TABLE "webhookEvent" (
          id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,
          "webhookId" bigint NOT NULL REFERENCES webhook(id) ON DELETE CASCADE,
          "eventId" text NOT NULL,
          type text NOT NULL,
          payload text NOT NULL,
          attempts integer NOT NULL DEFAULT 0,
          "nextAttemptAt" bigint NOT NULL,
          "claimedBy" text,
          "leaseUntil" bigint,
          "lastError" text,
          "createdAt" bigint NOT NULL
        )
        """,
        #"CREATE INDEX "webhookEvent_due" ON "webhookEvent"("nextAttemptAt")"#,
        #"CREATE INDEX "webhookEvent_webhook" ON "webhookEvent"("webhookId")"#,
    ]

    static let v4: [String] = [
        """
        CREATE TABLE "sendBudget" (
          "projectId" bigint PRIMARY KEY REFERENCES project(id) ON DELETE CASCADE,
          rate integer,
          second bigint NOT NULL DEFAULT 0,
          used bigint NOT NULL DEFAULT 0
        )
        """
    ]

    /// Each keyed send's `Idempotency-Key`, written in the transaction of its message: SQLite's v12.
    static let v6: [String] = [
        """
        CREATE TABLE "idempotencyKey" (
          id bigserial PRIMARY KEY,
          "projectId" bigint NOT NULL REFERENCES project(id) ON DELETE CASCADE,
          key text NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
          fingerprint text NOT NULL,
          "messageId" text NOT NULL,
          status integer NOT NULL,
          headers text NOT NULL,
          body bytea NOT NULL CHECK (length(body) <= 262144),
          complete boolean NOT NULL,
          "createdAt" bigint NOT NULL,
          "lockedUntil" bigint NOT NULL,
          "expiresAt" bigint NOT NULL,
          UNIQUE ("projectId", key)
        )
        """,
        #"CREATE INDEX "idempotencyKey_expiresAt" ON "idempotencyKey"("expiresAt")"#,
    ]

    /// Each project's counts a minute (`GET /api/stats`), as SQLite's `v14 minute stats`, and
    /// tokens in bytewise order.
    static let v8: [String] = [
        """
        CREATE TABLE "minuteStat" (
          "projectId" bigint NOT NULL REFERENCES project(id) ON DELETE CASCADE,
          minute bigint NOT NULL,
          accepted bigint NOT NULL DEFAULT 0,
          delivered bigint NOT NULL DEFAULT 0,
          failed bigint NOT NULL DEFAULT 0,
          pruned bigint NOT NULL DEFAULT 0,
          PRIMARY KEY ("projectId", minute)
        )
        """,
        #"CREATE INDEX "minuteStat_minute" ON "minuteStat"(minute)"#,
        // Browsing tokens by prefix (`GET /api/tokens`) reads one range of values compared
        // bytewise, as SQLite compares them; the unique index has the database's collation.
        #"CREATE INDEX "token_valueBytewise" ON token("projectId", value COLLATE "C")"#,
    ]

    /// SQLite's "v21 audit log": who changed what, when, read newest first per project or of one
    /// action, swept by age.
    static let v15: [String] = [
        """
        CREATE TABLE "auditEntry" (
          id bigserial PRIMARY KEY,
          "projectId" bigint NOT NULL REFERENCES project(id) ON DELETE CASCADE,
          at bigint NOT NULL,
          "keyId" bigint,
          "keyName" text NOT NULL,
          client text NOT NULL,
          action text NOT NULL,
          target text NOT NULL,
          details text NOT NULL CHECK (jsonb_typeof(details::jsonb) = 'object')
        )
        """,
        #"CREATE INDEX "auditEntry_project" ON "auditEntry"("projectId", id)"#,
        #"CREATE INDEX "auditEntry_projectAction" ON "auditEntry"("projectId", action, id)"#,
        #"CREATE INDEX "auditEntry_at" ON "auditEntry"(at)"#,
    ]

    /// SQLite's "v20 service account scopes": `NULL` for FCM's meaning (send, subscribe, read).
    static let v14: [String] = [#"ALTER TABLE "serviceAccount" ADD COLUMN scopes integer"#]

    /// SQLite's "v19 key scopes": each server key's name, scopes (send 1, subscribe 2, read 4,
    /// admin 8) and last use; keys made before have every scope.
    static let v13: [String] = [
        #"ALTER TABLE "serverKey" ADD COLUMN name text NOT NULL DEFAULT '', ADD COLUMN scopes integer NOT NULL DEFAULT 15, ADD COLUMN "lastUsedAt" bigint"#
    ]

    /// SQLite's "v16 relay error time": when the relay's last error was recorded.
    static let v10: [String] = [#"ALTER TABLE relay ADD COLUMN "lastErrorAt" bigint"#]

    /// SQLite's "v18 webhook fairness": a webhook's queue in due order, for its claims and its next
    /// attempt (it covers the index on "webhookId" alone), and when its last error was met.
    static let v12: [String] = [
        #"CREATE INDEX "webhookEvent_webhookDue" ON "webhookEvent"("webhookId", "nextAttemptAt")"#,
        #"DROP INDEX "webhookEvent_webhook""#,
        #"ALTER TABLE webhook ADD COLUMN "lastErrorAt" bigint"#,
    ]

    /// A project's settings for its channel in the channel's words, as SQLite's `v15 channel
    /// settings`: `relay` and `mirror` keep the channel's name, its settings and its secrets (JSON
    /// text), and the FCM HTTP v1 service accounts kept so far become the `fcm-v1` channel's.
    /// SQLite's "v17 message cancel".
    static let v11: [String] = [#"ALTER TABLE outbox ADD COLUMN "cancelledAt" bigint"#]

    static let v9: [String] = ["relay", "mirror"].flatMap { table in
        [
            """
            ALTER TABLE \(table) ADD COLUMN channel text, ADD COLUMN settings text, ADD COLUMN secrets text
            """,
            """
            UPDATE \(table) SET channel = 'fcm-v1',
              settings = jsonb_build_object('clientEmail', "clientEmail", 'firebaseProjectId', "firebaseProjectId",
                'privateKeyId', "privateKeyId", 'tokenUri', "tokenUri", 'upstream', upstream)::text,
              secrets = jsonb_build_object('privateKey', "privateKey")::text
            """,
            """
            ALTER TABLE \(table) ALTER COLUMN channel SET NOT NULL, ALTER COLUMN settings SET NOT NULL,
              ALTER COLUMN secrets SET NOT NULL,
              ADD CHECK (jsonb_typeof(settings::jsonb) = 'object'), ADD CHECK (jsonb_typeof(secrets::jsonb) = 'object'),
              DROP COLUMN "firebaseProjectId", DROP COLUMN "clientEmail", DROP COLUMN "privateKeyId",
              DROP COLUMN "privateKey", DROP COLUMN "tokenUri", DROP COLUMN upstream
            """,
        ]
    }

    /// The mirror of Google's device groups (`project mirror`), and whether a group may have
    /// members at Google this database has not seen (first met through a mirrored add or remove).
    static let v3: [String] = [
        """
        CREATE TABLE mirror (
          "projectId" bigint PRIMARY KEY REFERENCES project(id) ON DELETE CASCADE,
          "firebaseProjectId" text NOT NULL,
          "clientEmail" text NOT NULL,
          "privateKeyId" text,
          "privateKey" text NOT NULL,
          "tokenUri" text NOT NULL,
          upstream text NOT NULL,
          "createdAt" bigint NOT NULL
        )
        """,
        #"ALTER TABLE "deviceGroup" ADD COLUMN complete boolean NOT NULL DEFAULT true"#,
    ]

    static let v2: [String] = [
        #"DELETE FROM "audienceChange""#,
        #"ALTER TABLE "audienceChange" ADD COLUMN "replayOrder" bigint NOT NULL"#,
        #"CREATE SEQUENCE "audienceChange_replayOrder" AS bigint"#,
        #"CREATE INDEX "audienceChange_byReplayOrder" ON "audienceChange"("replayOrder")"#,
        // Just below the first position a transaction still to commit can have: every reader from
        // now on starts at or above it, and a counter position (a count of changes, never near a
        // million per transaction run so far) is below it.
        #"""
        UPDATE "audienceFeed" SET "prunedThrough" = (pg_snapshot_xmin(pg_current_snapshot())::text::bigint << 20) - 1
        """#,
        #"ALTER TABLE "audienceFeed" DROP COLUMN next"#,
        // The foreign keys a batch checks once per row, for rows this registry never deletes from
        // under them: tokens and projects are never deleted, and a topic only once empty, under
        // `FOR UPDATE` against the `FOR KEY SHARE` every subscriber already holds. Each check
        // locked the row it names again; together they were a third of a batchAdd's time.
        #"ALTER TABLE subscription DROP CONSTRAINT "subscription_topicId_fkey", DROP CONSTRAINT "subscription_tokenId_fkey""#,
        #"ALTER TABLE token DROP CONSTRAINT "token_projectId_fkey""#,
    ]
}
