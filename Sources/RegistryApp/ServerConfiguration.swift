import Delivery
import Logging
import Registry
import RegistryServer
import XMPPServer

/// Everything `serve` can be told, typed and grouped by concern. Built from flags and environment
/// variables by `ServerConfiguration.resolve`, which checks every value; the command line's other
/// commands read the storage part from the same table.
public struct ServerConfiguration: Sendable {
    public var storage = StorageConfiguration()
    /// The plain HTTP listener; `nil` with `--port off` (TLS only).
    public var http: HTTPSettings? = HTTPSettings()
    public var tls = TLSListenerConfiguration()
    public var xmpp = XMPPConfiguration()
    /// Delivery through FCM HTTP v1, for the projects `project relay` turned it on for.
    public var relay = RelayOptions()
    /// Webhooks: their retry schedule and which URLs they may reach.
    public var webhooks = WebhookOptions()
    /// How often the server reads the change feed for other processes' writes, when nothing
    /// rings its doorbell sooner.
    public var feedInterval = Duration.milliseconds(10)
    /// `GET /readyz` answers 503 while the audience index has not been current with the feed for
    /// longer than this (or the database does not answer).
    public var readyMaximumLag = Duration.seconds(10)
    public var limits = Limits()
    /// Where the first server key of a new database goes; `nil` prints it on stdout.
    public var keyFile: String?
    public var logLevel = Logger.Level.info
    /// On SIGTERM: how long requests in flight may take to finish before the rest are closed.
    public var shutdownDeadline = Duration.seconds(10)
    /// This server's name in the relay's claims (`--server-id`), kept from start to start; `nil`:
    /// a name made up at each start.
    public var serverID: String?

    /// The address every listener binds to.
    public var host: String {
        get { listening.host }
        set {
            http?.host = newValue
            tls.settings.host = newValue
        }
    }

    /// The connection limit of each listener.
    public var maximumConnections: Int {
        get { listening.maximumConnections }
        set {
            http?.maximumConnections = newValue
            tls.settings.maximumConnections = newValue
            xmpp.maximumConnections = newValue
        }
    }

    /// The listener settings every HTTP listener shares (the TLS one's, with its port).
    var listening: HTTPSettings { http ?? tls.settings }

    /// Whether the XMPP listener runs: whenever TLS is configured (or with `plaintext`), unless off.
    public var xmppListening: Bool {
        !xmpp.off && (tls.isConfigured || xmpp.plaintext)
    }

    /// The listeners that run, each with the connection limit to itself.
    public var listenerCount: Int {
        (http == nil ? 0 : 1) + (tls.isConfigured ? 1 : 0) + (xmppListening ? 1 : 0)
    }

    public init() {}
}

/// Where the registry is kept.
public struct StorageConfiguration: Sendable {
    /// The SQLite file.
    public var database = "./registry.sqlite"
    /// Where the audience index is saved between runs; `nil` is the database's path with
    /// `.audience` appended, and `off` in the option turns checkpoints off.
    public var checkpointPath: String?
    public var checkpointsEnabled = true
    /// How often the index is saved while the feed moves (and always at shutdown).
    public var checkpointInterval = Duration.seconds(300)

    /// The checkpoint file in effect, or `nil` when checkpoints are off. Beside an SQLite file by
    /// default; a server on PostgreSQL keeps one only where `--checkpoint` says (a URL is no place
    /// for a file, and it holds a password).
    public var resolvedCheckpointPath: String? {
        guard checkpointsEnabled else { return nil }
        if let checkpointPath { return checkpointPath }
        return database.lowercased().hasPrefix("postgres") && database.contains("://") ? nil : database + ".audience"
    }

    public init() {}
}

/// The TLS listener: HTTP/2 and HTTP/1.1 by ALPN, when both files are given.
public struct TLSListenerConfiguration: Sendable {
    public var certificate: String?
    public var key: String?
    /// Its port and connection bounds (the host and bounds are every listener's).
    public var settings: HTTPSettings = {
        var settings = HTTPSettings()
        settings.port = 8443
        return settings
    }()

    public var isConfigured: Bool { certificate != nil && key != nil }

    public init() {}
}

/// The XMPP connection server.
public struct XMPPConfiguration: Sendable {
    public var port = 5235
    public var off = false
    /// XMPP without TLS, for local debugging.
    public var plaintext = false
    public var settings = XMPPSettings()
    public var hub = XMPPHub.Limits()
    public var maximumConnections = 4096

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
