import Delivery
import FCMWire
import Logging
import Registry
import RegistryServer
import XMPPServer

/// Every option of `serve` in one table (flag, variable, help, default, how its value is read), with the kinds of
/// option it is made of: the one list `--help`, `docs/operations.md` and the command line's other commands read.
extension ServerConfiguration {
    /// Every option of `serve`, in the order `--help` and `docs/operations.md` list them.
    public static let options: [ConfigurationOption] = [
        text("host", "FCM_REGISTRY_HOST", "Address to listen on.", "127.0.0.1") { $1.host = $0 },
        portOrOff(
            "port", "FCM_REGISTRY_PORT", "Plain HTTP port (0 picks a free one; off: TLS only).", 8080,
            off: { $0.http = nil }, set: { $1.http?.port = $0 }),
        integer("tls-port", "FCM_REGISTRY_TLS_PORT", "TLS port (443 for clients that map Google's host names).", 8443, 0...65535) {
            $1.tls.settings.port = $0
        },
        text("tls-cert", "FCM_REGISTRY_TLS_CERT", "PEM certificate chain for the TLS listener (see tls init).", "") {
            $1.tls.certificate = $0.isEmpty ? nil : $0
        },
        text("tls-key", "FCM_REGISTRY_TLS_KEY", "PEM private key for the TLS listener.", "") {
            $1.tls.key = $0.isEmpty ? nil : $0
        },
        text("db", "FCM_REGISTRY_DB", "The SQLite file, or a postgres:// URL.", "./registry.sqlite") { $1.storage.database = $0 },
        text("key-file", "FCM_REGISTRY_KEY_FILE", "Write a new database's first server key here (mode 0600) instead of stdout.", "")
        { $1.keyFile = $0.isEmpty ? nil : $0 },
        ConfigurationOption(
            flag: "log-level", variable: "LOG_LEVEL", help: "trace, debug, info, notice, warning, error or critical.",
            apply: { value, configuration in
                guard let level = Logger.Level(rawValue: value.lowercased()) else {
                    return ConfigurationWording.logLevels
                }
                configuration.logLevel = level
                return nil
            }, defaultValue: "info"),
        integer("group-members", "FCM_REGISTRY_GROUP_MEMBERS", "Members per device group.", 20, 1...1_000_000) {
            $1.limits.membersPerGroup = $0
        },
        integer("batch-tokens", "FCM_REGISTRY_BATCH_TOKENS", "Tokens per batchAdd/batchRemove call.", 1000, 1...1_000_000) {
            $1.limits.tokensPerBatch = $0
        },
        integer("topics-per-token", "FCM_REGISTRY_TOPICS_PER_TOKEN", "Topics one token may hold.", 2000, 1...1_000_000) {
            $1.limits.topicsPerToken = $0
        },
        integer("body-bytes", "FCM_REGISTRY_BODY_BYTES", "Largest request body, in bytes.", 1 << 20, 1024...(64 << 20)) {
            $1.limits.requestBodyBytes = $0
        },
        integer(
            "message-log-entries", "FCM_REGISTRY_MESSAGE_LOG_ENTRIES", "Messages kept in each project's message log.",
            1000, 1...10_000_000
        ) { $1.limits.messageLogEntries = $0 },
        integer(
            "message-log-bytes", "FCM_REGISTRY_MESSAGE_LOG_BYTES", "Bytes kept in each project's message log.",
            64 << 20, 4096...(1 << 40)
        ) { $1.limits.messageLogBytes = $0 },
        integer(
            "feed-retention", "FCM_REGISTRY_FEED_RETENTION", "Change-feed entries kept for servers that fall behind.",
            100_000, 1000...100_000_000
        ) { $1.limits.feedRetention = $0 },
        ConfigurationOption(
            flag: "idempotency-retention", variable: "FCM_REGISTRY_IDEMPOTENCY_RETENTION",
            help: "How long a send's Idempotency-Key is kept, with its answer (1s to 30d).",
            apply: { value, configuration in
                guard let duration = parseDuration(value, upTo: 30 * 86_400_000), duration >= .seconds(1) else {
                    return ConfigurationWording.idempotencyRetention
                }
                configuration.limits.idempotencyRetention = duration
                return nil
            }, defaultValue: "24h"),
        ConfigurationOption(
            flag: "audit-retention", variable: "FCM_REGISTRY_AUDIT_RETENTION",
            help: "How long the audit log keeps an entry (1d to 3650d).",
            apply: { value, configuration in
                guard let duration = parseDuration(value, upTo: 3650 * 86_400_000), duration >= .seconds(86_400) else {
                    return ConfigurationWording.auditRetention
                }
                configuration.limits.auditRetention = duration
                return nil
            }, defaultValue: "90d"),
        duration(
            "feed-interval", "FCM_REGISTRY_FEED_INTERVAL", "How often to read other processes' writes from the feed.",
            "10ms"
        ) { $1.feedInterval = $0 },
        duration(
            "ready-max-lag", "FCM_REGISTRY_READY_MAX_LAG",
            "GET /readyz answers 503 while this server has not read the change feed for this long.", "10s"
        ) {
            $1.readyMaximumLag = $0
            $1.http?.readyMaximumLag = $0
            $1.tls.settings.readyMaximumLag = $0
        },
        text(
            "checkpoint", "FCM_REGISTRY_CHECKPOINT",
            "File the audience index is saved to and started from; off turns checkpoints off.", "<db>.audience"
        ) { value, configuration in
            configuration.storage.checkpointsEnabled = value != "off"
            configuration.storage.checkpointPath = value == "off" || value.isEmpty ? nil : value
        },
        duration(
            "checkpoint-interval", "FCM_REGISTRY_CHECKPOINT_INTERVAL",
            "How often the audience index is saved while it changes (and at shutdown).", "5m"
        ) { $1.storage.checkpointInterval = $0 },
        duration("idle-timeout", "FCM_REGISTRY_IDLE_TIMEOUT", "Close a connection idle this long.", "60s") {
            $1.http?.idleTimeout = $0
            $1.tls.settings.idleTimeout = $0
        },
        duration(
            "header-timeout", "FCM_REGISTRY_HEADER_TIMEOUT", "A request's head must arrive within this time.", "10s"
        ) {
            $1.http?.headerTimeout = $0
            $1.tls.settings.headerTimeout = $0
        },
        duration("body-timeout", "FCM_REGISTRY_BODY_TIMEOUT", "A request's body must arrive within this time.", "30s") {
            $1.http?.bodyTimeout = $0
            $1.tls.settings.bodyTimeout = $0
        },
        integer(
            "max-connections", "FCM_REGISTRY_MAX_CONNECTIONS", "Open connections at most.", 4096, 1...1_000_000
        ) { $1.maximumConnections = $0 },
        duration(
            "shutdown-deadline", "FCM_REGISTRY_SHUTDOWN_DEADLINE",
            "On SIGTERM, how long requests in flight may take before the rest are closed.", "10s"
        ) {
            $1.shutdownDeadline = $0
            $1.xmpp.hub.drainTimeout = $0
        },
        portOrOff(
            "xmpp-port", "FCM_REGISTRY_XMPP_PORT",
            "XMPP connection server port; it listens whenever TLS is configured (off: never).", 5235,
            off: { $0.xmpp.off = true }, set: { $1.xmpp.port = $0 }),
        ConfigurationOption(
            flag: "xmpp-plaintext", variable: "FCM_REGISTRY_XMPP_PLAINTEXT",
            help: "Serve XMPP without TLS, for local debugging only.",
            apply: { value, configuration in
                guard let flag = parseSwitch(value) else { return ConfigurationWording.trueOrFalse }
                configuration.xmpp.plaintext = flag
                return nil
            }, defaultValue: "false", isSwitch: true),
        integer(
            "xmpp-stanza-bytes", "FCM_REGISTRY_XMPP_STANZA_BYTES", "Largest XMPP stanza, in bytes.", 64 * 1024,
            1024...(16 << 20)
        ) { $1.xmpp.settings.stanzaBytes = $0 },
        integer(
            "xmpp-pending", "FCM_REGISTRY_XMPP_PENDING",
            "Messages awaiting their ack on one XMPP connection, each way (FCM's 100).", 100, 1...100_000
        ) { $1.xmpp.hub.pendingPerConnection = $0 },
        integer(
            "xmpp-connections", "FCM_REGISTRY_XMPP_CONNECTIONS", "XMPP connections per sender (FCM's 1000).", 1000,
            1...1_000_000
        ) { $1.xmpp.hub.connectionsPerProject = $0 },
        integer(
            "xmpp-upstream-queue", "FCM_REGISTRY_XMPP_UPSTREAM_QUEUE",
            "Upstream messages kept per project while no XMPP session can take them.", 10_000, 1...10_000_000
        ) { $1.xmpp.hub.waitingPerProject = $0 },
        duration(
            "xmpp-login-timeout", "FCM_REGISTRY_XMPP_LOGIN_TIMEOUT", "An XMPP client must log in within this time.",
            "10s"
        ) { $1.xmpp.settings.loginTimeout = $0 },
        duration(
            "xmpp-idle-timeout", "FCM_REGISTRY_XMPP_IDLE_TIMEOUT",
            "Close an XMPP connection that sends nothing (not even a ping) this long.", "5m"
        ) { $1.xmpp.settings.idleTimeout = $0 },
        ConfigurationOption(
            flag: "server-id", variable: "FCM_REGISTRY_SERVER_ID",
            help:
                "This server's name in the relay's claims, kept from start to start: started again under it after a crash, the server takes its unfinished messages back at once. Never give two running servers one name.",
            apply: { value, configuration in
                guard (1...200).contains(value.utf8.count), value.utf8.allSatisfy({ (0x21...0x7E).contains($0) }) else {
                    return ConfigurationWording.serverID
                }
                configuration.serverID = value
                return nil
            }, defaultValue: "a new name at each start"),
        duration(
            "relay-answer-timeout", "FCM_REGISTRY_RELAY_ANSWER_TIMEOUT",
            "How long a send to tokens or a device group waits for FCM's outcomes before answering.", "10s"
        ) { $1.relay.answerTimeout = $0 },
        integer(
            "relay-max-attempts", "FCM_REGISTRY_RELAY_MAX_ATTEMPTS",
            "Requests to FCM for one recipient before a 5xx or connection error fails it (a 429 spends none).", 5, 1...100
        ) { $1.relay.maximumAttempts = $0 },
        duration(
            "relay-deadline", "FCM_REGISTRY_RELAY_DEADLINE",
            "How long after its send a message is retried (its time to live, when shorter).", "24h"
        ) { $1.relay.deadline = $0 },
        integer(
            "relay-rate", "FCM_REGISTRY_RELAY_RATE", "Sends per second to FCM, per project (FCM's quota: 10,000).",
            10_000, 1...10_000_000
        ) { $1.relay.ratePerSecond = $0 },
        duration(
            "relay-lease", "FCM_REGISTRY_RELAY_LEASE",
            "How long a server's claim on an outbox message lasts unrenewed (a dead server's passes on after it).",
            "30s"
        ) { $1.relay.lease = $0 },
        integer(
            "relay-outbox-limit", "FCM_REGISTRY_RELAY_OUTBOX_LIMIT",
            "Undelivered messages a project's outbox holds; past it, sends are refused as unavailable.", 10_000,
            1...10_000_000
        ) { $1.relay.outboxMessages = $0 },
        integer(
            "relay-concurrency", "FCM_REGISTRY_RELAY_CONCURRENCY",
            "Requests to FCM in flight at once for one message (HTTP/2 streams).", 200, 1...10_000
        ) { $1.relay.concurrency = $0 },
        integer(
            "relay-page-size", "FCM_REGISTRY_RELAY_PAGE_SIZE",
            "Recipients read and sent together; their outcomes are recorded as they arrive.", 500,
            1...10_000
        ) { $1.relay.pageSize = $0 },
        duration(
            "relay-poll-interval", "FCM_REGISTRY_RELAY_POLL_INTERVAL",
            "How often the outbox is looked at for retries and other servers' work.", "1s"
        ) { $1.relay.pollInterval = $0 },
        text(
            "relay-ca-file", "FCM_REGISTRY_RELAY_CA_FILE",
            "PEM CA certificates trusted besides the system's, for a proxy or an emulator upstream.", ""
        ) { $1.relay.caFile = $0.isEmpty ? nil : $0 },
        ConfigurationOption(
            flag: "webhook-allow-private-networks", variable: "FCM_REGISTRY_WEBHOOK_ALLOW_PRIVATE_NETWORKS",
            help:
                "Let webhooks reach loopback, private, link-local and other non-public addresses, and use http: for a receiver on this host or network only.",
            apply: { value, configuration in
                guard let flag = parseSwitch(value) else { return ConfigurationWording.trueOrFalse }
                configuration.webhooks.allowPrivateNetworks = flag
                return nil
            }, defaultValue: "false", isSwitch: true),
        ConfigurationOption(
            flag: "webhook-retry-schedule", variable: "FCM_REGISTRY_WEBHOOK_RETRY_SCHEDULE",
            help:
                "The waits between a webhook event's attempts, comma-separated; once spent, the event fails (the default retries for about 27 h).",
            apply: { value, configuration in
                let waits = value.split(separator: ",", omittingEmptySubsequences: false).map {
                    parseDuration(String($0.filter { $0 != " " }))
                }
                guard (1...50).contains(waits.count), waits.allSatisfy({ $0 != nil }) else {
                    return ConfigurationWording.retrySchedule
                }
                configuration.webhooks.retrySchedule = WebhookRetrySchedule(waits: waits.compactMap { $0 })
                return nil
            }, defaultValue: "5s,5m,30m,2h,5h,10h,10h"),
    ]


    // MARK: - Option kinds

    private static func text(
        _ flag: String, _ variable: String, _ help: String, _ fallback: String,
        _ set: @escaping @Sendable (String, inout ServerConfiguration) -> Void
    ) -> ConfigurationOption {
        ConfigurationOption(
            flag: flag, variable: variable, help: help,
            apply: { value, configuration in
                set(value, &configuration)
                return nil
            }, defaultValue: fallback)
    }

    /// A port, 0–65535, or `off` for a listener that should not run.
    private static func portOrOff(
        _ flag: String, _ variable: String, _ help: String, _ fallback: Int,
        off: @escaping @Sendable (inout ServerConfiguration) -> Void,
        set: @escaping @Sendable (Int, inout ServerConfiguration) -> Void
    ) -> ConfigurationOption {
        ConfigurationOption(
            flag: flag, variable: variable, help: help,
            apply: { value, configuration in
                if value == "off" {
                    off(&configuration)
                    return nil
                }
                guard let port = Int(value), (0...65535).contains(port) else {
                    return ConfigurationWording.portOrOff
                }
                set(port, &configuration)
                return nil
            }, defaultValue: String(fallback))
    }

    private static func integer(
        _ flag: String, _ variable: String, _ help: String, _ fallback: Int, _ range: ClosedRange<Int>,
        _ set: @escaping @Sendable (Int, inout ServerConfiguration) -> Void
    ) -> ConfigurationOption {
        ConfigurationOption(
            flag: flag, variable: variable, help: help,
            apply: { value, configuration in
                guard let number = Int(value), range.contains(number) else {
                    return ConfigurationWording.integer(from: range.lowerBound, to: range.upperBound)
                }
                set(number, &configuration)
                return nil
            }, defaultValue: String(fallback))
    }

    private static func duration(
        _ flag: String, _ variable: String, _ help: String, _ fallback: String,
        _ set: @escaping @Sendable (Duration, inout ServerConfiguration) -> Void
    ) -> ConfigurationOption {
        ConfigurationOption(
            flag: flag, variable: variable, help: help,
            apply: { value, configuration in
                guard let duration = parseDuration(value) else {
                    return ConfigurationWording.duration
                }
                set(duration, &configuration)
                return nil
            }, defaultValue: fallback)
    }

    /// `true`/`false`, `1`/`0`, `yes`/`no`, `on`/`off`.
    static func parseSwitch(_ text: String) -> Bool? {
        switch text.lowercased() {
        case "true", "1", "yes", "on": true
        case "false", "0", "no", "off": false
        default: nil
        }
    }

    /// `250ms`, `10s`, `2m`, `1h`, `7d`: a whole number and a unit, 1 ms to `maximum` milliseconds (24 h).
    static func parseDuration(_ text: String, upTo maximum: Int64 = 86_400_000) -> Duration? {
        let units: [(String, Int64)] = [("ms", 1), ("s", 1000), ("m", 60_000), ("h", 3_600_000), ("d", 86_400_000)]
        for (unit, milliseconds) in units where text.hasSuffix(unit) {
            guard let number = Int64(text.dropLast(unit.count)), number > 0 else { return nil }
            let total = number.multipliedReportingOverflow(by: milliseconds)
            guard !total.overflow, total.partialValue <= maximum else { return nil }
            return .milliseconds(total.partialValue)
        }
        return nil
    }
}
