/// The SQL of the migrations that made the registry's own tables: projects, keys, tokens, groups, topics, the
/// change feed, the message log, service accounts, notification keys, the audit log. `Migrations.migrator` names them
/// and runs them in its order; the text of a migration that has landed never changes.
extension Migrations {
    /// Each server key's name, scopes (a bit set: send 1, subscribe 2, read 4, admin 8) and last
    /// use (to the minute). Keys made before have every scope.
    static let v19 = """
        ALTER TABLE serverKey ADD COLUMN name TEXT NOT NULL DEFAULT '';
        ALTER TABLE serverKey ADD COLUMN scopes INTEGER NOT NULL DEFAULT 15;
        ALTER TABLE serverKey ADD COLUMN lastUsedAt INTEGER;
        """

    /// What a token says about its device and when its app last checked in (`TokenAttributes`):
    /// columns added without a default, so the migration is instant at any size. A token from
    /// before has no `lastSeenAt` and reads its `updatedAt` until a registration call names it.
    static let v22 = """
        ALTER TABLE token ADD COLUMN platform TEXT;
        ALTER TABLE token ADD COLUMN locale TEXT;
        ALTER TABLE token ADD COLUMN timeZone TEXT;
        ALTER TABLE token ADD COLUMN appVersion TEXT;
        ALTER TABLE token ADD COLUMN lastSeenAt INTEGER;
        """

    /// The change feed carries what tokens say (`described`) and when registration calls named
    /// them (`seen`), for the audience index's attributes. SQLite cannot change a `CHECK`, so the
    /// table is made again: its rows copied as they are, and its id sequence carried over, so that
    /// ids go on where they stopped even when every row was pruned.
    static let v25 = """
        CREATE TABLE audienceChangeV25 (
          id INTEGER PRIMARY KEY AUTOINCREMENT,
          projectId INTEGER NOT NULL,
          kind TEXT NOT NULL CHECK (kind IN ('subscribed', 'unsubscribed', 'registered', 'unregistered', 'described',
                                             'seen', 'reset')),
          topic TEXT,
          tokenIds BLOB NOT NULL,
          createdAt INTEGER NOT NULL
        );
        INSERT INTO audienceChangeV25 (id, projectId, kind, topic, tokenIds, createdAt)
          SELECT id, projectId, kind, topic, tokenIds, createdAt FROM audienceChange;
        CREATE TEMP TABLE audienceChangeSequence AS SELECT seq FROM sqlite_sequence WHERE name = 'audienceChange';
        DROP TABLE audienceChange;
        ALTER TABLE audienceChangeV25 RENAME TO audienceChange;
        DELETE FROM sqlite_sequence WHERE name = 'audienceChange';
        INSERT INTO sqlite_sequence (name, seq) SELECT 'audienceChange', seq FROM temp.audienceChangeSequence;
        DROP TABLE temp.audienceChangeSequence;
        """

    /// How many stale tokens a fan-out left out of a logged message (`TokenPolicy.sendToStale`).
    static let v24 = """
        ALTER TABLE message ADD COLUMN skippedStale INTEGER NOT NULL DEFAULT 0;
        """

    /// Each project's token policy (`TokenPolicy`: seconds; `tokenExpireAfter` NULL for no expiry)
    /// and when the expiry sweep last claimed a round (`tokenSweepAt`, cleared when the policy
    /// changes); an index on each registered token's last-seen time as every reader takes it
    /// (`COALESCE(lastSeenAt, updatedAt)`), so that finding expired tokens is not a scan.
    static let v23 = """
        ALTER TABLE project ADD COLUMN tokenStaleAfter INTEGER NOT NULL DEFAULT 2592000;
        ALTER TABLE project ADD COLUMN tokenExpireAfter INTEGER;
        ALTER TABLE project ADD COLUMN tokenSendToStale INTEGER NOT NULL DEFAULT 1;
        ALTER TABLE project ADD COLUMN tokenSweepAt INTEGER;
        CREATE INDEX token_lastSeen ON token(projectId, COALESCE(lastSeenAt, updatedAt)) WHERE state = 'registered';
        """

    /// The audit log: who changed what, when (`AuditLog.swift`), read newest first per project,
    /// or of one action; swept by age.
    static let v21 = """
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

    static let v1 = """
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
    static let v2 = """
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
    static let v3 = """
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
    static let v4 = """
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
    static let v5 = """
        CREATE TABLE messageRecipientChunk (
          projectId INTEGER NOT NULL,
          chunk INTEGER NOT NULL,
          messageId INTEGER NOT NULL REFERENCES message(id) ON DELETE CASCADE,
          tokenIds BLOB NOT NULL,
          PRIMARY KEY (projectId, chunk, messageId)
        ) WITHOUT ROWID;
        CREATE INDEX messageRecipientChunk_messageId ON messageRecipientChunk(messageId);
        """

    /// Notification keys this database did not seal, which keep naming the groups they named:
    /// `keyring` holds the secrets of other registries (brought by `import`) and `keyringGroup`
    /// which group each of their sealed group ids now is; `importedKey` holds other issuers' keys
    /// verbatim (Google's, brought by `import-groups`). When a group is deleted its keys stay,
    /// naming no group (`groupId` NULL), as the keys this database seals do: a send to one reaches
    /// no one instead of being read as a registration token.
    static let v6 = """
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
}
