CREATE TABLE project (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  projectId TEXT NOT NULL UNIQUE,
  senderId TEXT NOT NULL UNIQUE,
  createdAt INTEGER NOT NULL
, tokenStaleAfter INTEGER NOT NULL DEFAULT 2592000, tokenExpireAfter INTEGER, tokenSendToStale INTEGER NOT NULL DEFAULT 1, tokenSweepAt INTEGER);

CREATE TABLE serverKey (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  projectId INTEGER NOT NULL REFERENCES project(id) ON DELETE CASCADE,
  keyHash BLOB NOT NULL UNIQUE,
  createdAt INTEGER NOT NULL,
  revokedAt INTEGER
, name TEXT NOT NULL DEFAULT '', scopes INTEGER NOT NULL DEFAULT 15, lastUsedAt INTEGER);

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
  updatedAt INTEGER NOT NULL, platform TEXT, locale TEXT, timeZone TEXT, appVersion TEXT, lastSeenAt INTEGER,
  UNIQUE (projectId, value)
);

CREATE TABLE deviceGroup (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  projectId INTEGER NOT NULL REFERENCES project(id) ON DELETE CASCADE,
  name TEXT NOT NULL,
  createdAt INTEGER NOT NULL, complete INTEGER NOT NULL DEFAULT 1,
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

CREATE TABLE audienceFeed (
  id INTEGER PRIMARY KEY CHECK (id = 1),
  prunedThrough INTEGER NOT NULL
);

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
, skippedStale INTEGER NOT NULL DEFAULT 0);

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

CREATE TABLE serviceAccount (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  projectId INTEGER NOT NULL REFERENCES project(id) ON DELETE CASCADE,
  keyId TEXT NOT NULL UNIQUE,
  clientEmail TEXT NOT NULL,
  clientId TEXT NOT NULL,
  publicKey TEXT NOT NULL,
  createdAt INTEGER NOT NULL,
  revokedAt INTEGER
, tokenUri TEXT, scopes INTEGER);

CREATE INDEX serviceAccount_projectId ON serviceAccount(projectId);

CREATE TABLE usedAssertion (
  hash BLOB PRIMARY KEY,
  firstUsedAt INTEGER NOT NULL,
  expiresAt INTEGER NOT NULL
) WITHOUT ROWID;

CREATE INDEX usedAssertion_expiresAt ON usedAssertion(expiresAt);

CREATE TABLE messageRecipientChunk (
  projectId INTEGER NOT NULL,
  chunk INTEGER NOT NULL,
  messageId INTEGER NOT NULL REFERENCES message(id) ON DELETE CASCADE,
  tokenIds BLOB NOT NULL,
  PRIMARY KEY (projectId, chunk, messageId)
) WITHOUT ROWID;

CREATE INDEX messageRecipientChunk_messageId ON messageRecipientChunk(messageId);

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
, cancelledAt INTEGER);

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

CREATE TABLE sendBudget (
  projectId INTEGER PRIMARY KEY REFERENCES project(id) ON DELETE CASCADE,
  rate INTEGER,
  second INTEGER NOT NULL DEFAULT 0,
  used INTEGER NOT NULL DEFAULT 0
);

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
, lastErrorAt INTEGER);

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

CREATE VIEW webhookQueue AS
  SELECT project.projectId AS project, webhook.publicId AS webhook, webhook.url, webhookEvent.eventId,
    webhookEvent.type, webhookEvent.attempts, datetime(webhookEvent.nextAttemptAt / 1000, 'unixepoch') AS nextAttempt,
    webhookEvent.lastError
  FROM webhookEvent JOIN webhook ON webhook.id = webhookEvent.webhookId JOIN project ON project.id = webhook.projectId;

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

CREATE TABLE "relay" (
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
, lastErrorAt INTEGER);

CREATE TABLE "mirror" (
  projectId INTEGER PRIMARY KEY REFERENCES project(id) ON DELETE CASCADE,
  channel TEXT NOT NULL,
  settings TEXT NOT NULL CHECK (json_type(settings) = 'object'),
  secrets TEXT NOT NULL CHECK (json_type(secrets) = 'object'),
  createdAt INTEGER NOT NULL
);

CREATE INDEX webhookEvent_webhookDue ON webhookEvent(webhookId, nextAttemptAt);

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

CREATE INDEX token_lastSeen ON token(projectId, COALESCE(lastSeenAt, updatedAt)) WHERE state = 'registered';

CREATE TABLE "audienceChange" (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  projectId INTEGER NOT NULL,
  kind TEXT NOT NULL CHECK (kind IN ('subscribed', 'unsubscribed', 'registered', 'unregistered', 'described',
                                     'seen', 'reset')),
  topic TEXT,
  tokenIds BLOB NOT NULL,
  createdAt INTEGER NOT NULL
);
