import Logging
import Registry

/// Everything `serve` can be told, typed. Built from flags and environment variables by
/// `ServerConfiguration.resolve`, which checks every value; `buildApplication` takes it as is.
public struct ServerConfiguration: Sendable {
    public var host = "127.0.0.1"
    public var port = 8080
    /// Whether the plain HTTP listener runs (`--port off` leaves only TLS).
    public var plainHTTP = true
    /// The TLS listener: HTTP/2 and HTTP/1.1 by ALPN, on `tlsPort`, when both files are given.
    public var tlsCertificate: String?
    public var tlsKey: String?
    public var tlsPort = 8443
    /// The SQLite file.
    public var databasePath = "./registry.sqlite"
    /// Where the first server key of a new database goes; `nil` prints it on stdout.
    public var keyFile: String?
    public var logLevel = Logger.Level.info
    public var limits = Limits()
    /// How often the server reads the change feed for other processes' writes.
    public var feedInterval = Duration.milliseconds(10)
    /// Where the audience index is saved between runs; `nil` is the database's path with
    /// `.audience` appended, and `off` in the option turns checkpoints off.
    public var checkpointPath: String?
    public var checkpointsEnabled = true
    /// How often the index is saved while the feed moves (and always at shutdown).
    public var checkpointInterval = Duration.seconds(300)

    /// The checkpoint file in effect, or `nil` when checkpoints are off.
    public var resolvedCheckpointPath: String? {
        checkpointsEnabled ? checkpointPath ?? databasePath + ".audience" : nil
    }
    /// A connection idle this long (no request in progress, or a request stalled mid-way) is closed.
    public var idleTimeout = Duration.seconds(60)
    /// The whole request head must arrive within this time of the connection's first byte, or of the previous answer.
    public var headerTimeout = Duration.seconds(10)
    /// The whole request body must arrive within this time of its head.
    public var bodyTimeout = Duration.seconds(30)
    /// Open connections at most; past it the server stops accepting until one closes.
    public var maximumConnections = 4096
    /// On SIGTERM: how long requests in flight may take to finish before the rest are closed.
    public var shutdownDeadline = Duration.seconds(10)

    /// The XMPP connection server's port; it listens whenever TLS is configured (or with
    /// `xmppPlaintext`), unless `--xmpp-port off`.
    public var xmppPort = 5235
    public var xmppOff = false
    /// XMPP without TLS, for local debugging.
    public var xmppPlaintext = false
    public var xmpp = XMPPSettings()
    /// Messages awaiting an answer or an ack on one XMPP connection, each way.
    public var xmppPending = 100
    public var xmppConnectionsPerProject = 1000
    /// Upstream messages waiting, per project, for an XMPP session to take them.
    public var xmppWaitingUpstream = 10_000

    /// Whether the XMPP listener runs.
    public var xmppListening: Bool {
        !xmppOff && (tlsCertificate != nil || xmppPlaintext)
    }

    public init() {}
}

/// A bad value for an option: names the flag and the environment variable.
public struct ConfigurationError: Error, CustomStringConvertible {
    public var description: String

    public init(description: String) {
        self.description = description
    }
}

/// One option of `serve`: its flag, its environment variable, what it sets and how it is read.
public struct ConfigurationOption: Sendable {
    /// Without the leading dashes: `port`.
    public var flag: String
    public var variable: String
    public var help: String
    /// Reads a value into the configuration; `nil` back means the value is not acceptable, and
    /// the text says what is.
    let apply: @Sendable (String, inout ServerConfiguration) -> String?

    /// The default, as the documentation shows it.
    public var defaultValue: String
    /// A switch: `--flag` alone means `true`.
    public var isSwitch = false
}

extension ServerConfiguration {
    /// Every option of `serve`, in the order `--help` and `docs/operations.md` list them.
    public static let options: [ConfigurationOption] = [
        text("host", "FCM_REGISTRY_HOST", "Address to listen on.", "127.0.0.1") { $1.host = $0 },
        portOrOff(
            "port", "FCM_REGISTRY_PORT", "Plain HTTP port (0 picks a free one; off: TLS only).", 8080,
            off: { $0.plainHTTP = false }, set: { $1.port = $0 }),
        integer("tls-port", "FCM_REGISTRY_TLS_PORT", "TLS port (443 for clients that map Google's host names).", 8443, 0...65535) {
            $1.tlsPort = $0
        },
        text("tls-cert", "FCM_REGISTRY_TLS_CERT", "PEM certificate chain for the TLS listener (see tls init).", "") {
            $1.tlsCertificate = $0.isEmpty ? nil : $0
        },
        text("tls-key", "FCM_REGISTRY_TLS_KEY", "PEM private key for the TLS listener.", "") {
            $1.tlsKey = $0.isEmpty ? nil : $0
        },
        text("db", "FCM_REGISTRY_DB", "The SQLite file.", "./registry.sqlite") { $1.databasePath = $0 },
        text("key-file", "FCM_REGISTRY_KEY_FILE", "Write a new database's first server key here (mode 0600) instead of stdout.", "")
        { $1.keyFile = $0.isEmpty ? nil : $0 },
        ConfigurationOption(
            flag: "log-level", variable: "LOG_LEVEL", help: "trace, debug, info, notice, warning, error or critical.",
            apply: { value, configuration in
                guard let level = Logger.Level(rawValue: value.lowercased()) else {
                    return "one of trace, debug, info, notice, warning, error, critical"
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
        duration(
            "feed-interval", "FCM_REGISTRY_FEED_INTERVAL", "How often to read other processes' writes from the feed.",
            "10ms"
        ) { $1.feedInterval = $0 },
        text(
            "checkpoint", "FCM_REGISTRY_CHECKPOINT",
            "File the audience index is saved to and started from; off turns checkpoints off.", "<db>.audience"
        ) { value, configuration in
            configuration.checkpointsEnabled = value != "off"
            configuration.checkpointPath = value == "off" || value.isEmpty ? nil : value
        },
        duration(
            "checkpoint-interval", "FCM_REGISTRY_CHECKPOINT_INTERVAL",
            "How often the audience index is saved while it changes (and at shutdown).", "5m"
        ) { $1.checkpointInterval = $0 },
        duration("idle-timeout", "FCM_REGISTRY_IDLE_TIMEOUT", "Close a connection idle this long.", "60s") {
            $1.idleTimeout = $0
        },
        duration(
            "header-timeout", "FCM_REGISTRY_HEADER_TIMEOUT", "A request's head must arrive within this time.", "10s"
        ) { $1.headerTimeout = $0 },
        duration("body-timeout", "FCM_REGISTRY_BODY_TIMEOUT", "A request's body must arrive within this time.", "30s") {
            $1.bodyTimeout = $0
        },
        integer(
            "max-connections", "FCM_REGISTRY_MAX_CONNECTIONS", "Open connections at most.", 4096, 1...1_000_000
        ) { $1.maximumConnections = $0 },
        duration(
            "shutdown-deadline", "FCM_REGISTRY_SHUTDOWN_DEADLINE",
            "On SIGTERM, how long requests in flight may take before the rest are closed.", "10s"
        ) { $1.shutdownDeadline = $0 },
        portOrOff(
            "xmpp-port", "FCM_REGISTRY_XMPP_PORT",
            "XMPP connection server port; it listens whenever TLS is configured (off: never).", 5235,
            off: { $0.xmppOff = true }, set: { $1.xmppPort = $0 }),
        ConfigurationOption(
            flag: "xmpp-plaintext", variable: "FCM_REGISTRY_XMPP_PLAINTEXT",
            help: "Serve XMPP without TLS, for local debugging only.",
            apply: { value, configuration in
                guard let flag = parseSwitch(value) else { return "true or false" }
                configuration.xmppPlaintext = flag
                return nil
            }, defaultValue: "false", isSwitch: true),
        integer(
            "xmpp-stanza-bytes", "FCM_REGISTRY_XMPP_STANZA_BYTES", "Largest XMPP stanza, in bytes.", 64 * 1024,
            1024...(16 << 20)
        ) { $1.xmpp.stanzaBytes = $0 },
        integer(
            "xmpp-pending", "FCM_REGISTRY_XMPP_PENDING",
            "Messages awaiting their ack on one XMPP connection, each way (FCM's 100).", 100, 1...100_000
        ) { $1.xmppPending = $0 },
        integer(
            "xmpp-connections", "FCM_REGISTRY_XMPP_CONNECTIONS", "XMPP connections per sender (FCM's 1000).", 1000,
            1...1_000_000
        ) { $1.xmppConnectionsPerProject = $0 },
        integer(
            "xmpp-upstream-queue", "FCM_REGISTRY_XMPP_UPSTREAM_QUEUE",
            "Upstream messages kept per project while no XMPP session can take them.", 10_000, 1...10_000_000
        ) { $1.xmppWaitingUpstream = $0 },
        duration(
            "xmpp-login-timeout", "FCM_REGISTRY_XMPP_LOGIN_TIMEOUT", "An XMPP client must log in within this time.",
            "10s"
        ) { $1.xmpp.loginTimeout = $0 },
        duration(
            "xmpp-idle-timeout", "FCM_REGISTRY_XMPP_IDLE_TIMEOUT",
            "Close an XMPP connection that sends nothing (not even a ping) this long.", "5m"
        ) { $1.xmpp.idleTimeout = $0 },
    ]

    /// The configuration from `flags` (by flag name, without dashes), then the environment, then
    /// the defaults.
    /// - Throws: `ConfigurationError` naming the first option whose value is not acceptable.
    public static func resolve(flags: [String: String], environment: [String: String]) throws(ConfigurationError)
        -> ServerConfiguration
    {
        var configuration = ServerConfiguration()
        for option in options {
            let (value, source): (String?, String) =
                flags[option.flag].map { ($0, "--\(option.flag)") } ?? (environment[option.variable], option.variable)
            guard let value else { continue }
            if let expected = option.apply(value, &configuration) {
                throw ConfigurationError(
                    description: "invalid value '\(value)' for \(source) (--\(option.flag) / \(option.variable)): expected \(expected)")
            }
        }
        guard (configuration.tlsCertificate == nil) == (configuration.tlsKey == nil) else {
            throw ConfigurationError(description: "--tls-cert and --tls-key (FCM_REGISTRY_TLS_CERT, FCM_REGISTRY_TLS_KEY) go together")
        }
        guard !configuration.xmppPlaintext || !configuration.xmppOff else {
            throw ConfigurationError(description: "--xmpp-plaintext and --xmpp-port off contradict each other")
        }
        guard configuration.plainHTTP || configuration.tlsCertificate != nil else {
            throw ConfigurationError(description: "--port off leaves no listener: give --tls-cert and --tls-key")
        }
        return configuration
    }

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
                    return "an integer from 0 to 65535, or off"
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
                    return "an integer from \(range.lowerBound) to \(range.upperBound)"
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
                    return "a duration such as 250ms, 10s or 2m, from 1ms to 24h"
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

    /// `250ms`, `10s`, `2m`, `1h`: a whole number and a unit, 1 ms to 24 h.
    static func parseDuration(_ text: String) -> Duration? {
        let units: [(String, Int64)] = [("ms", 1), ("s", 1000), ("m", 60_000), ("h", 3_600_000)]
        for (unit, milliseconds) in units where text.hasSuffix(unit) {
            guard let number = Int64(text.dropLast(unit.count)), number > 0 else { return nil }
            let total = number.multipliedReportingOverflow(by: milliseconds)
            guard !total.overflow, total.partialValue <= 86_400_000 else { return nil }
            return .milliseconds(total.partialValue)
        }
        return nil
    }
}
