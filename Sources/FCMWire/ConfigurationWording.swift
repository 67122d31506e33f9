/// What `serve` says when it cannot start, and what any command says of a `--db` it cannot open: a
/// bad flag or variable, options that contradict each other, a port it cannot take, a certificate
/// or database it cannot read. Each names the flag and the environment variable to fix. Written
/// once here so that the call sites (`RegistryApp`, the command line's `serve`) name them and tests
/// and docs quote one place.
public enum ConfigurationWording {
    // MARK: - Reading the arguments

    /// An argument of `serve` that is not `--option`.
    public static func unexpectedArgument(_ argument: String) -> String {
        "unexpected argument '\(argument)'"
    }

    /// `name` is the flag without its dashes, here and below.
    public static func missingValue(_ name: String) -> String {
        "missing value for --\(name)"
    }

    public static func unknownOption(_ name: String) -> String {
        "unknown option --\(name); see fcm-registry serve --help"
    }

    /// A value an option cannot take; `source` is where it came from (`--port` or
    /// `FCM_REGISTRY_PORT`), `expected` one of the expectations below.
    public static func invalidValue(
        _ value: String, source: String, flag: String, variable: String, expected: String
    ) -> String {
        "invalid value '\(value)' for \(source) (--\(flag) / \(variable)): expected \(expected)"
    }

    // MARK: - What an option expects (after "expected")

    public static let logLevels = "one of trace, debug, info, notice, warning, error, critical"
    public static let idempotencyRetention = "a duration such as 90m, 24h or 7d, from 1s to 30d"
    public static let auditRetention = "a duration such as 30d or 2160h, from 1d to 3650d"
    /// A switch's value (`true`/`false`, `1`/`0`, `yes`/`no`, `on`/`off`).
    public static let trueOrFalse = "true or false"
    public static let serverID = "1 to 200 printable ASCII characters without spaces"
    public static let retrySchedule = "1 to 50 durations separated by commas, such as 5s,5m,30m,2h,5h,10h,10h"
    public static let portOrOff = "an integer from 0 to 65535, or off"
    public static let duration = "a duration such as 250ms, 10s or 2m, from 1ms to 24h"

    public static func integer(from lowerBound: Int, to upperBound: Int) -> String {
        "an integer from \(lowerBound) to \(upperBound)"
    }

    // MARK: - Options that contradict each other

    public static let tlsCertificateAndKeyTogether =
        "--tls-cert and --tls-key (FCM_REGISTRY_TLS_CERT, FCM_REGISTRY_TLS_KEY) go together"
    public static let xmppPlaintextWithoutPort = "--xmpp-plaintext and --xmpp-port off contradict each other"
    public static let noListener = "--port off leaves no listener: give --tls-cert and --tls-key"

    public static func cannotReadCAFile(_ path: String) -> String {
        "cannot read CA certificates from \(path) (--relay-ca-file / FCM_REGISTRY_RELAY_CA_FILE): expected a PEM file"
    }

    // MARK: - Listeners (checked before anything is created)

    /// The option that names the host, in every listener's error that is about the host.
    public static let hostOption = "--host / FCM_REGISTRY_HOST"
    /// The options that choose each listener's port, as a listener's error names them.
    public static let httpPortOption = "--port / FCM_REGISTRY_PORT"
    public static let tlsPortOption = "--tls-port / FCM_REGISTRY_TLS_PORT"
    public static let xmppPortOption = "--xmpp-port / FCM_REGISTRY_XMPP_PORT"

    /// `listeners`: each listener's port and the option that chose it (`--port / FCM_REGISTRY_PORT`).
    public static func twoListenersOnOnePort(_ listeners: [(port: Int, option: String)]) -> String {
        "two listeners on one port: \(listeners.map { "\($0.port) (\($0.option))" }.joined(separator: ", "))"
    }

    /// `reason`: why TLS refused the files.
    public static func cannotReadTLSFiles(certificate: String, key: String, reason: String) -> String {
        "cannot read the TLS certificate \(certificate) or key \(key) (--tls-cert, --tls-key): \(reason)"
    }

    /// `option`: the flag and variable that chose the port.
    public static func portInUse(_ port: Int, option: String) -> String {
        "port \(port) is in use (\(option)): another process listens on it"
    }

    public static func portNeedsPrivilege(_ port: Int, option: String) -> String {
        "port \(port) needs root or CAP_NET_BIND_SERVICE (\(option))"
    }

    public static func notAnAddressHere(_ host: String) -> String {
        "\(host) is not an address of this machine (\(hostOption))"
    }

    /// Any other reason a port cannot be taken, in the system's or NIO's words.
    public static func cannotListen(host: String, port: Int, option: String, reason: String) -> String {
        "cannot listen on \(host):\(port) (\(option), \(hostOption)): \(reason)"
    }

    // MARK: - The database (--db)

    /// A PostgreSQL URL where it may not be shown (it may hold a password) or cannot be read.
    public static let aPostgreSQLURL = "a PostgreSQL URL"
    /// `generate` and the commands that write SQLite's tables directly, given a PostgreSQL URL.
    public static let sqliteOnly = "this command writes SQLite files only"

    public static func cannotOpenDatabase(_ location: String, reason: String) -> String {
        "cannot open the database \(location): \(reason)"
    }

    /// The file is there but holds no fcm-registry database (it was left as it was).
    public static func notARegistryDatabase(_ location: String, reason: String) -> String {
        "\(location) is not a fcm-registry database: \(reason)"
    }

    /// `--db` names a folder; `example` is a file in it (`/data/registry.sqlite`).
    public static func databaseIsAFolder(example: String) -> String {
        "it is a folder; name a file in it, such as \(example)"
    }

    public static func folderMissing(_ folder: String) -> String {
        "the folder \(folder) does not exist"
    }

    public static func notAFolder(_ path: String) -> String {
        "\(path) is not a folder"
    }
}
