import AudienceEngine
import Foundation
import GRDB

/// The schema, as named migrations. A migration is never edited once it has landed: a change is
/// a new migration, and `schema/registry.sql` is regenerated from a freshly migrated database.
///
/// Times are milliseconds since 1970 (UTC) in integer columns: compact, and the views show them
/// as text for people at the `sqlite3` prompt.
enum Migrations {
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1 projects, tokens, groups, topics") { db in
            try db.execute(sql: v1)
        }
        migrator.registerMigration("v2 change feed, message log") { db in
            try db.execute(sql: v2)
        }
        migrator.registerMigration("v3 service accounts") { db in
            try db.execute(sql: v3)
        }
        // New tables only: their foreign keys are checked as rows go in, not by a scan of every
        // table of the database afterwards (minutes at 10M tokens).
        migrator.registerMigration("v4 token URIs, used assertions", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: v4)
        }
        migrator.registerMigration("v5 message recipients by chunk", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: v5)
            try moveRecipientsIntoChunks(db)
        }
        migrator.registerMigration("v6 imported notification keys", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: v6)
        }
        migrator.registerMigration("v7 relay and outbox", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: v7)
        }
        migrator.registerMigration("v8 upstream messages", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: v8)
        }
        migrator.registerMigration("v9 mirror of Google's device groups", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: v9)
        }
        migrator.registerMigration("v10 send budget", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: v10)
        }
        migrator.registerMigration("v12 idempotency keys", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: v12)
        }
        migrator.registerMigration("v13 webhooks", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: v13)
        }
        migrator.registerMigration("v14 minute stats", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: v14)
        }
        // Two small tables remade: nothing refers to them, so no foreign key is checked again.
        migrator.registerMigration("v15 channel settings", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: v15)
        }
        migrator.registerMigration("v16 relay error time", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: v16)
        }
        migrator.registerMigration("v17 message cancel", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: v17)
        }
        migrator.registerMigration("v19 key scopes", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: v19)
        }
        migrator.registerMigration("v20 service account scopes", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: "ALTER TABLE serviceAccount ADD COLUMN scopes INTEGER")
        }
        migrator.registerMigration("v18 webhook fairness", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: v18)
        }
        migrator.registerMigration("v21 audit log", foreignKeyChecks: .immediate) { db in
            try db.execute(sql: v21)
        }
        return migrator
    }

    /// Each server key's name, scopes (a bit set: send 1, subscribe 2, read 4, admin 8) and last
    /// use (to the minute). Keys made before have every scope.
    private static let v19 = """
        ALTER TABLE serverKey ADD COLUMN name TEXT NOT NULL DEFAULT '';
        ALTER TABLE serverKey ADD COLUMN scopes INTEGER NOT NULL DEFAULT 15;
        ALTER TABLE serverKey ADD COLUMN lastUsedAt INTEGER;
        """

    /// The audit log: who changed what, when (`AuditLog.swift`), read newest first per project,
    /// or of one action; swept by age.
    private static let v21 = """
        CREATE TABLE auditEntry (
          id INTEGER PRIMARY KEY AUTOINCREMENT,
          projectId INTEGER NOT NULL REFERENCES project(id) ON DELETE CASCADE,
          at INTEGER NOT NULL,
          keyId INTEGER,
          keyName TEXT NOT NULL,
          client TEXT NOT NULL,
          action TEXT NOT NULL,
          target TEXT NOT NULL,
          details TEXT NOT NULL CHECK (json_type(details) = 'object')
        );
        CREATE INDEX auditEntry_project ON auditEntry(projectId, id);
        CREATE INDEX auditEntry_projectAction ON auditEntry(projectId, action, id);
        CREATE INDEX auditEntry_at ON auditEntry(at);
        """

    private static let v1 = """
        CREATE TABLE project (
          id INTEGER PRIMARY KEY AUTOINCREMENT,
          projectId TEXT NOT NULL UNIQUE,
          senderId TEXT NOT NULL UNIQUE,
          createdAt INTEGER NOT NULL
        );

        CREATE TABLE serverKey (
          id INTEGER PRIMARY KEY AUTOINCREMENT,
          projectId INTEGER NOT NULL REFERENCES project(id) ON DELETE CASCADE,
          keyHash BLOB NOT NULL UNIQUE,
          createdAt INTEGER NOT NULL,
          revokedAt INTEGER
        );
        CREATE INDEX serverKey_projectId ON serverKey(projectId);

        CREATE TABLE secret (
          name TEXT PRIMARY KEY,
          value BLOB NOT NULL
        ) WITHOUT ROWID;

        CREATE TABLE token (
          id INTEGER PRIMARY KEY,
          projectId INTEGER NOT NULL REFERENCES project(id) ON DELETE CASCADE,
          value TEXT NOT NULL,
          state TEXT NOT NULL DEFAULT 'registered' CHECK (state IN ('registered', 'unregistered')),
          createdAt INTEGER NOT NULL,
          updatedAt INTEGER NOT NULL,
          UNIQUE (projectId, value)
        );

        CREATE TABLE deviceGroup (
          id INTEGER PRIMARY KEY AUTOINCREMENT,
          projectId INTEGER NOT NULL REFERENCES project(id) ON DELETE CASCADE,
          name TEXT NOT NULL,
          createdAt INTEGER NOT NULL,
          UNIQUE (projectId, name)
        );

        CREATE TABLE groupMember (
          groupId INTEGER NOT NULL REFERENCES deviceGroup(id) ON DELETE CASCADE,
          tokenId INTEGER NOT NULL REFERENCES token(id) ON DELETE CASCADE,
          addedAt INTEGER NOT NULL,
          PRIMARY KEY (groupId, tokenId)
        ) WITHOUT ROWID;
        CREATE INDEX groupMember_tokenId ON groupMember(tokenId);

        CREATE TABLE topic (
          id INTEGER PRIMARY KEY,
          projectId INTEGER NOT NULL REFERENCES project(id) ON DELETE CASCADE,
          name TEXT NOT NULL,
          createdAt INTEGER NOT NULL,
          UNIQUE (projectId, name)
        );

        CREATE TABLE subscription (
          topicId INTEGER NOT NULL REFERENCES topic(id) ON DELETE CASCADE,
          tokenId INTEGER NOT NULL REFERENCES token(id) ON DELETE CASCADE,
          createdAt INTEGER NOT NULL,
          PRIMARY KEY (topicId, tokenId)
        ) WITHOUT ROWID;
        CREATE INDEX subscription_tokenId ON subscription(tokenId);

        -- Views for people at the sqlite3 prompt.

        CREATE VIEW groupMembers AS
        SELECT project.projectId AS project, deviceGroup.name AS groupName, token.value AS token,
               token.state AS tokenState, datetime(groupMember.addedAt / 1000, 'unixepoch') AS addedAt
        FROM groupMember
        JOIN deviceGroup ON deviceGroup.id = groupMember.groupId
        JOIN project ON project.id = deviceGroup.projectId
        JOIN token ON token.id = groupMember.tokenId;

        CREATE VIEW topicSubscribers AS
        SELECT project.projectId AS project, topic.name AS topic, token.value AS token,
               datetime(subscription.createdAt / 1000, 'unixepoch') AS subscribedAt
        FROM subscription
        JOIN topic ON topic.id = subscription.topicId
        JOIN project ON project.id = topic.projectId
        JOIN token ON token.id = subscription.tokenId;

        CREATE VIEW topicSubscriberCounts AS
        SELECT project.projectId AS project, topic.name AS topic,
               (SELECT COUNT(*) FROM subscription WHERE subscription.topicId = topic.id) AS subscribers
        FROM topic
        JOIN project ON project.id = topic.projectId;

        CREATE VIEW tokenTopics AS
        SELECT project.projectId AS project, token.value AS token, token.state AS tokenState, topic.name AS topic,
               datetime(subscription.createdAt / 1000, 'unixepoch') AS subscribedAt
        FROM subscription
        JOIN token ON token.id = subscription.tokenId
        JOIN topic ON topic.id = subscription.topicId
        JOIN project ON project.id = token.projectId;
        """

    /// The change feed every server follows, and the per-project message log.
    private static let v2 = """
        CREATE TABLE audienceChange (
          id INTEGER PRIMARY KEY AUTOINCREMENT,
          projectId INTEGER NOT NULL,
          kind TEXT NOT NULL CHECK (kind IN ('subscribed', 'unsubscribed', 'registered', 'unregistered', 'reset')),
          topic TEXT,
          tokenIds BLOB NOT NULL,
          createdAt INTEGER NOT NULL
        );

        CREATE TABLE audienceFeed (
          id INTEGER PRIMARY KEY CHECK (id = 1),
          prunedThrough INTEGER NOT NULL
        );
        INSERT INTO audienceFeed (id, prunedThrough) VALUES (1, 0);

        CREATE TABLE message (
          id INTEGER PRIMARY KEY AUTOINCREMENT,
          projectId INTEGER NOT NULL REFERENCES project(id) ON DELETE CASCADE,
          messageId TEXT NOT NULL,
          protocol TEXT NOT NULL,
          target TEXT NOT NULL,
          body TEXT NOT NULL,
          recipientCount INTEGER NOT NULL,
          recipients BLOB NOT NULL,
          bytes INTEGER NOT NULL,
          receivedAt INTEGER NOT NULL
        );
        CREATE INDEX message_projectId ON message(projectId, id);

        CREATE TABLE messageLog (
          projectId INTEGER PRIMARY KEY REFERENCES project(id) ON DELETE CASCADE,
          entries INTEGER NOT NULL,
          bytes INTEGER NOT NULL
        );

        CREATE VIEW messages AS
        SELECT project.projectId AS project, message.messageId, message.protocol, message.target,
               message.recipientCount, datetime(message.receivedAt / 1000, 'unixepoch') AS receivedAt, message.body
        FROM message
        JOIN project ON project.id = message.projectId;
        """

    /// Service accounts for OAuth 2.0: only the public key is kept.
    private static let v3 = """
        CREATE TABLE serviceAccount (
          id INTEGER PRIMARY KEY AUTOINCREMENT,
          projectId INTEGER NOT NULL REFERENCES project(id) ON DELETE CASCADE,
          keyId TEXT NOT NULL UNIQUE,
          clientEmail TEXT NOT NULL,
          clientId TEXT NOT NULL,
          publicKey TEXT NOT NULL,
          createdAt INTEGER NOT NULL,
          revokedAt INTEGER
        );
        CREATE INDEX serviceAccount_projectId ON serviceAccount(projectId);
        """

    /// The token URI each service account's file names (NULL: Google's, as before), and the
    /// assertions already exchanged, with when they first were, kept until they expire.
    private static let v4 = """
        ALTER TABLE serviceAccount ADD COLUMN tokenUri TEXT;

        CREATE TABLE usedAssertion (
          hash BLOB PRIMARY KEY,
          firstUsedAt INTEGER NOT NULL,
          expiresAt INTEGER NOT NULL
        ) WITHOUT ROWID;
        CREATE INDEX usedAssertion_expiresAt ON usedAssertion(expiresAt);
        """

    /// Whom each logged message reached, one row per 65,536-id chunk of token ids it touched,
    /// keyed by project and chunk: the messages that reached a token are an index range, and each
    /// is checked against one chunk's ids, not its whole recipient set. `message.recipients` is
    /// left empty from now on.
    private static let v5 = """
        CREATE TABLE messageRecipientChunk (
          projectId INTEGER NOT NULL,
          chunk INTEGER NOT NULL,
          messageId INTEGER NOT NULL REFERENCES message(id) ON DELETE CASCADE,
          tokenIds BLOB NOT NULL,
          PRIMARY KEY (projectId, chunk, messageId)
        ) WITHOUT ROWID;
        CREATE INDEX messageRecipientChunk_messageId ON messageRecipientChunk(messageId);
        """

    /// Moves each logged message's recipients into `messageRecipientChunk`, a page of messages at
    /// a time. A recipient set that cannot be read (none has been seen) leaves its message out of
    /// searches by token; the message itself stays.
    private static func moveRecipientsIntoChunks(_ db: Database) throws {
        var after: Int64 = 0
        while true {
            let rows = try Row.fetchAll(
                db, sql: "SELECT id, projectId, recipients FROM message WHERE id > ? ORDER BY id LIMIT 100",
                arguments: [after])
            guard let last = rows.last else { return }
            after = last["id"]
            for row in rows where !(row["recipients"] as Data).isEmpty {
                var blob = [UInt8](row["recipients"] as Data)[...]
                if let recipients = try? RoaringBitmap(deserializing: &blob) {
                    try MessageRecipients.insert(
                        RecipientChunks.chunks(of: recipients), of: row["id"], project: row["projectId"], db)
                }
                try db.execute(sql: "UPDATE message SET recipients = X'' WHERE id = ?", arguments: [row["id"] as Int64])
            }
        }
    }

    /// Notification keys this database did not seal, which keep naming the groups they named:
    /// `keyring` holds the secrets of other registries (brought by `import`) and `keyringGroup`
    /// which group each of their sealed group ids now is; `importedKey` holds other issuers' keys
    /// verbatim (Google's, brought by `import-groups`). When a group is deleted its keys stay,
    /// naming no group (`groupId` NULL), as the keys this database seals do: a send to one reaches
    /// no one instead of being read as a registration token.
    private static let v6 = """
        CREATE TABLE keyring (
          id INTEGER PRIMARY KEY AUTOINCREMENT,
          projectId INTEGER NOT NULL REFERENCES project(id) ON DELETE CASCADE,
          fingerprint TEXT NOT NULL,
          secret BLOB NOT NULL,
          sealedFor INTEGER NOT NULL,
          importedAt INTEGER NOT NULL,
          UNIQUE (projectId, fingerprint)
        );
        CREATE TABLE keyringGroup (
          keyringId INTEGER NOT NULL REFERENCES keyring(id) ON DELETE CASCADE,
          sourceGroupId INTEGER NOT NULL,
          groupId INTEGER REFERENCES deviceGroup(id) ON DELETE SET NULL,
          PRIMARY KEY (keyringId, sourceGroupId)
        ) WITHOUT ROWID;
        CREATE INDEX keyringGroup_groupId ON keyringGroup(groupId);
        CREATE TABLE importedKey (
          projectId INTEGER NOT NULL REFERENCES project(id) ON DELETE CASCADE,
          notificationKey TEXT NOT NULL,
          groupId INTEGER REFERENCES deviceGroup(id) ON DELETE SET NULL,
          importedAt INTEGER NOT NULL,
          PRIMARY KEY (projectId, notificationKey)
        ) WITHOUT ROWID;
        CREATE INDEX importedKey_groupId ON importedKey(groupId);
        """

    /// Delivery through FCM HTTP v1. `relay` holds a project's Firebase project and service
    /// account key (the key never leaves the database but to sign assertions). `outbox` has one
    /// row per relayed message, named by its message log row, which the log does not evict while
    /// the job is unfinished; `delivery` one row per recipient attempted, naming the token by id
    /// when the registry has it, by value when only FCM knows it.
    private static let v7 = """
        CREATE TABLE relay (
          projectId INTEGER PRIMARY KEY REFERENCES project(id) ON DELETE CASCADE,
          firebaseProjectId TEXT NOT NULL,
          clientEmail TEXT NOT NULL,
          privateKeyId TEXT,
          privateKey TEXT NOT NULL,
          tokenUri TEXT NOT NULL,
          upstream TEXT NOT NULL,
          pausedUntil INTEGER,
          lastError TEXT,
          delivered INTEGER NOT NULL DEFAULT 0,
          failed INTEGER NOT NULL DEFAULT 0,
          pruned INTEGER NOT NULL DEFAULT 0,
          createdAt INTEGER NOT NULL
        );
        CREATE TABLE outbox (
          messageId INTEGER PRIMARY KEY REFERENCES message(id) ON DELETE CASCADE,
          projectId INTEGER NOT NULL REFERENCES project(id) ON DELETE CASCADE,
          template TEXT NOT NULL,
          direct INTEGER NOT NULL,
          recipients INTEGER NOT NULL,
          delivered INTEGER NOT NULL DEFAULT 0,
          failed INTEGER NOT NULL DEFAULT 0,
          cursor INTEGER NOT NULL DEFAULT -1,
          walked INTEGER NOT NULL,
          claimedBy TEXT,
          leaseUntil INTEGER,
          notBefore INTEGER NOT NULL,
          deadline INTEGER NOT NULL,
          createdAt INTEGER NOT NULL,
          finishedAt INTEGER
        );
        CREATE INDEX outbox_open ON outbox(notBefore) WHERE finishedAt IS NULL;
        CREATE INDEX outbox_projectOpen ON outbox(projectId) WHERE finishedAt IS NULL;
        CREATE TABLE delivery (
          id INTEGER PRIMARY KEY,
          messageId INTEGER NOT NULL REFERENCES outbox(messageId) ON DELETE CASCADE,
          tokenId INTEGER,
          token TEXT,
          state TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
          error TEXT,
          attempts INTEGER NOT NULL DEFAULT 0,
          nextAttemptAt INTEGER,
          updatedAt INTEGER NOT NULL,
          CHECK ((tokenId IS NULL) <> (token IS NULL)),
          UNIQUE (messageId, tokenId),
          UNIQUE (messageId, token)
        );
        CREATE INDEX delivery_due ON delivery(messageId, nextAttemptAt) WHERE state = 'pending';
        CREATE INDEX delivery_state ON delivery(messageId, state, id);
        CREATE INDEX message_messageId ON message(projectId, messageId);
        """

    /// Upstream messages and receipts waiting for, or held by, an XMPP session of some server
    /// (`UpstreamStore`): `heldBy` names the server, `heldUntil` ends its lease.
    private static let v8 = """
        CREATE TABLE upstreamMessage (
          id INTEGER PRIMARY KEY,
          projectId INTEGER NOT NULL REFERENCES project(id) ON DELETE CASCADE,
          messageId TEXT NOT NULL,
          json TEXT NOT NULL,
          isReceipt INTEGER NOT NULL,
          heldBy TEXT,
          heldUntil INTEGER,
          createdAt INTEGER NOT NULL
        );
        CREATE INDEX upstreamMessage_project ON upstreamMessage(projectId, id);
        CREATE INDEX upstreamMessage_heldBy ON upstreamMessage(heldBy) WHERE heldBy IS NOT NULL;
        """

    /// The mirror of Google's device groups (`project mirror`): a project's service account and
    /// the upstream its `/fcm/notification` calls are forwarded to. A group first met through a
    /// mirrored `add` or `remove` was made at Google before the mirror: `complete` is 0 until
    /// nothing says it has members this database has not seen.
    private static let v9 = """
        CREATE TABLE mirror (
          projectId INTEGER PRIMARY KEY REFERENCES project(id) ON DELETE CASCADE,
          firebaseProjectId TEXT NOT NULL,
          clientEmail TEXT NOT NULL,
          privateKeyId TEXT,
          privateKey TEXT NOT NULL,
          tokenUri TEXT NOT NULL,
          upstream TEXT NOT NULL,
          createdAt INTEGER NOT NULL
        );
        ALTER TABLE deviceGroup ADD COLUMN complete INTEGER NOT NULL DEFAULT 1;
        """

    /// Each project's own rate toward FCM (`project relay --rate`), and the budget of the current
    /// second that every server on the database takes its sends from.
    private static let v10 = """
        CREATE TABLE sendBudget (
          projectId INTEGER PRIMARY KEY REFERENCES project(id) ON DELETE CASCADE,
          rate INTEGER,
          second INTEGER NOT NULL DEFAULT 0,
          used INTEGER NOT NULL DEFAULT 0
        );
        """

    /// Each keyed send's `Idempotency-Key`, written in the transaction of its message, with the
    /// request's fingerprint and the answer given (`status`, `headers` as a JSON array of
    /// `[name, value]` pairs, `body`). `complete` is 0 while a direct send waits for FCM: the
    /// answer then is the one given if FCM says nothing in time, and the sending server holds the
    /// key until `lockedUntil`. Expired keys are deleted a few at a time by later keyed sends.
    private static let v12 = """
        CREATE TABLE idempotencyKey (
          id INTEGER PRIMARY KEY,
          projectId INTEGER NOT NULL REFERENCES project(id) ON DELETE CASCADE,
          key TEXT NOT NULL CHECK (length(key) BETWEEN 1 AND 255),
          fingerprint TEXT NOT NULL,
          messageId TEXT NOT NULL,
          status INTEGER NOT NULL,
          headers TEXT NOT NULL,
          body BLOB NOT NULL CHECK (length(body) <= 262144),
          complete INTEGER NOT NULL,
          createdAt INTEGER NOT NULL,
          lockedUntil INTEGER NOT NULL,
          expiresAt INTEGER NOT NULL,
          UNIQUE (projectId, key)
        );
        CREATE INDEX idempotencyKey_expiresAt ON idempotencyKey(expiresAt);
        """

    /// Each project's webhooks (`/api/webhooks`) and the queue of their events: one row per event
    /// and webhook, written in the outbox's transaction that caused it, deleted once the webhook
    /// took it or its retries are spent. `events` is a bit set of `WebhookEventType`; `backlog`
    /// counts the webhook's queued rows, so that its bound costs no count.
    private static let v13 = """
        CREATE TABLE webhook (
          id INTEGER PRIMARY KEY,
          publicId TEXT NOT NULL UNIQUE,
          projectId INTEGER NOT NULL REFERENCES project(id) ON DELETE CASCADE,
          url TEXT NOT NULL,
          events INTEGER NOT NULL,
          secret TEXT NOT NULL,
          previousSecret TEXT,
          previousSecretUntil INTEGER,
          backlog INTEGER NOT NULL DEFAULT 0,
          sent INTEGER NOT NULL DEFAULT 0,
          failed INTEGER NOT NULL DEFAULT 0,
          dropped INTEGER NOT NULL DEFAULT 0,
          lastAttemptAt INTEGER,
          lastError TEXT,
          failingSince INTEGER,
          disabledAt INTEGER,
          disabledReason TEXT,
          createdAt INTEGER NOT NULL
        );
        CREATE INDEX webhook_project ON webhook(projectId);
        CREATE TABLE webhookEvent (
          id INTEGER PRIMARY KEY,
          webhookId INTEGER NOT NULL REFERENCES webhook(id) ON DELETE CASCADE,
          eventId TEXT NOT NULL,
          type TEXT NOT NULL,
          payload TEXT NOT NULL,
          attempts INTEGER NOT NULL DEFAULT 0,
          nextAttemptAt INTEGER NOT NULL,
          claimedBy TEXT,
          leaseUntil INTEGER,
          lastError TEXT,
          createdAt INTEGER NOT NULL
        );
        CREATE INDEX webhookEvent_due ON webhookEvent(nextAttemptAt);
        CREATE INDEX webhookEvent_webhook ON webhookEvent(webhookId);
        CREATE VIEW webhookQueue AS
          SELECT project.projectId AS project, webhook.publicId AS webhook, webhook.url, webhookEvent.eventId,
            webhookEvent.type, webhookEvent.attempts, datetime(webhookEvent.nextAttemptAt / 1000, 'unixepoch') AS nextAttempt,
            webhookEvent.lastError
          FROM webhookEvent JOIN webhook ON webhook.id = webhookEvent.webhookId JOIN project ON project.id = webhook.projectId;
        """

    /// Each project's counts a minute (`GET /api/stats`): messages accepted, deliveries that ended
    /// delivered or failed, tokens pruned. Written in the transactions of what they count, kept
    /// about a day (`MinuteStats.retention`). `minute` is the minute's start in milliseconds.
    private static let v14 = """
        CREATE TABLE minuteStat (
          projectId INTEGER NOT NULL REFERENCES project(id) ON DELETE CASCADE,
          minute INTEGER NOT NULL,
          accepted INTEGER NOT NULL DEFAULT 0,
          delivered INTEGER NOT NULL DEFAULT 0,
          failed INTEGER NOT NULL DEFAULT 0,
          pruned INTEGER NOT NULL DEFAULT 0,
          PRIMARY KEY (projectId, minute)
        ) WITHOUT ROWID;
        CREATE INDEX minuteStat_minute ON minuteStat(minute);
        """

    /// When the relay's last error was recorded; an error recorded before stays without a time.
    private static let v16 = """
        ALTER TABLE relay ADD COLUMN lastErrorAt INTEGER;
        """

    /// A project's settings for its channel, in the channel's words rather than in columns of
    /// FCM's: `relay` and `mirror` keep the channel's name and two JSON objects, its settings
    /// (shown by `GET /api/relay`) and its secrets (never shown). The rows of the FCM HTTP v1
    /// service accounts kept so far move into them as the `fcm-v1` channel's.
    /// A cancelled job: finished at the same time, its recipients without an outcome cancelled.
    private static let v17 = """
        ALTER TABLE outbox ADD COLUMN cancelledAt INTEGER;
        """

    /// A webhook's claims look at its own queue in due order (one seek per webhook, whatever
    /// waits for it), which also finds its next attempt; the index on `webhookId` alone is
    /// covered by it. `lastErrorAt`: when its last error was met.
    private static let v18 = """
        CREATE INDEX webhookEvent_webhookDue ON webhookEvent(webhookId, nextAttemptAt);
        DROP INDEX webhookEvent_webhook;
        ALTER TABLE webhook ADD COLUMN lastErrorAt INTEGER;
        """

    private static let v15 = """
        CREATE TABLE relayV15 (
          projectId INTEGER PRIMARY KEY REFERENCES project(id) ON DELETE CASCADE,
          channel TEXT NOT NULL,
          settings TEXT NOT NULL CHECK (json_type(settings) = 'object'),
          secrets TEXT NOT NULL CHECK (json_type(secrets) = 'object'),
          pausedUntil INTEGER,
          lastError TEXT,
          delivered INTEGER NOT NULL DEFAULT 0,
          failed INTEGER NOT NULL DEFAULT 0,
          pruned INTEGER NOT NULL DEFAULT 0,
          createdAt INTEGER NOT NULL
        );
        INSERT INTO relayV15 (projectId, channel, settings, secrets, pausedUntil, lastError, delivered, failed, pruned, createdAt)
        SELECT projectId, 'fcm-v1',
          json_object('clientEmail', clientEmail, 'firebaseProjectId', firebaseProjectId, 'privateKeyId', privateKeyId,
                      'tokenUri', tokenUri, 'upstream', upstream),
          json_object('privateKey', privateKey), pausedUntil, lastError, delivered, failed, pruned, createdAt
        FROM relay;
        DROP TABLE relay;
        ALTER TABLE relayV15 RENAME TO relay;

        CREATE TABLE mirrorV15 (
          projectId INTEGER PRIMARY KEY REFERENCES project(id) ON DELETE CASCADE,
          channel TEXT NOT NULL,
          settings TEXT NOT NULL CHECK (json_type(settings) = 'object'),
          secrets TEXT NOT NULL CHECK (json_type(secrets) = 'object'),
          createdAt INTEGER NOT NULL
        );
        INSERT INTO mirrorV15 (projectId, channel, settings, secrets, createdAt)
        SELECT projectId, 'fcm-v1',
          json_object('clientEmail', clientEmail, 'firebaseProjectId', firebaseProjectId, 'privateKeyId', privateKeyId,
                      'tokenUri', tokenUri, 'upstream', upstream),
          json_object('privateKey', privateKey), createdAt
        FROM mirror;
        DROP TABLE mirror;
        ALTER TABLE mirrorV15 RENAME TO mirror;
        """
}
