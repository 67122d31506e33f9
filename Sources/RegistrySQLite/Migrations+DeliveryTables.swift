/// The SQL of the migrations that made the tables of delivery and its neighbours: the relay and its outbox, upstream
/// messages, the mirror of Google's groups, the send budget, idempotency keys, webhooks, the minute counts and the
/// channels' settings. `Migrations.migrator` names them and runs them in its order; the text of a migration that has
/// landed never changes.
extension Migrations {
    /// Delivery through FCM HTTP v1. `relay` holds a project's Firebase project and service
    /// account key (the key never leaves the database but to sign assertions). `outbox` has one
    /// row per relayed message, named by its message log row, which the log does not evict while
    /// the job is unfinished; `delivery` one row per recipient attempted, naming the token by id
    /// when the registry has it, by value when only FCM knows it.
    static let v7 = """
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
    static let v8 = """
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
    static let v9 = """
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
    static let v10 = """
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
    static let v12 = """
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
    static let v13 = """
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
    static let v14 = """
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
    static let v16 = """
        ALTER TABLE relay ADD COLUMN lastErrorAt INTEGER;
        """

    /// A cancelled job: finished at the same time, its recipients without an outcome cancelled.
    static let v17 = """
        ALTER TABLE outbox ADD COLUMN cancelledAt INTEGER;
        """

    /// A webhook's claims look at its own queue in due order (one seek per webhook, whatever
    /// waits for it), which also finds its next attempt; the index on `webhookId` alone is
    /// covered by it. `lastErrorAt`: when its last error was met.
    static let v18 = """
        CREATE INDEX webhookEvent_webhookDue ON webhookEvent(webhookId, nextAttemptAt);
        DROP INDEX webhookEvent_webhook;
        ALTER TABLE webhook ADD COLUMN lastErrorAt INTEGER;
        """

    /// A project's settings for its channel, in the channel's words rather than in columns of
    /// FCM's: `relay` and `mirror` keep the channel's name and two JSON objects, its settings
    /// (shown by `GET /api/relay`) and its secrets (never shown). The rows of the FCM HTTP v1
    /// service accounts kept so far move into them as the `fcm-v1` channel's.
    static let v15 = """
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
