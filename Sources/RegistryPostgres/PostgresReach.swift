import Foundation
import PostgresNIO

/// Why no connection to PostgreSQL could be made, in a person's words rather than postgres-nio's
/// and NIO's types: `cannot reach PostgreSQL at db.internal:5432: connection refused`, or the
/// resolver's words for a host it does not know. Used where a connection fails at start (a
/// command, `serve`) and in the log of an outage.
struct PostgresReach: Error, Sendable, CustomStringConvertible {
    /// Where the connection was going, `host:port` (`[::1]:5432` for an IPv6 address).
    var place: String
    /// What went wrong: "connection refused", "unknown host (Name or service not known)", …
    var reason: String
    /// The host's name is not known to the resolver: trying again will not help.
    var unknownHost: Bool

    var description: String { "cannot reach PostgreSQL at \(place): \(reason)" }

    /// The failure `error` stands for, when it is a failure to connect at all (not PostgreSQL
    /// refusing the login, which it words itself).
    init?(_ error: any Error, host: String, port: Int) {
        guard let error = error as? PSQLError, error.code == .connectionError, let underlying = error.underlying else {
            return nil
        }
        place = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        (reason, unknownHost) = Self.words(for: underlying)
    }

    /// NIO's connection errors, worded: the resolver's answer, else the first attempt's error.
    static func words(for error: any Error) -> (String, unknownHost: Bool) {
        switch error {
        case let error as NIOConnectionError:
            if let resolving = error.dnsAError ?? error.dnsAAAAError { return words(for: resolving) }
            if let first = error.connectionErrors.first { return words(for: first.error) }
            return ("no address to connect to", false)
        case let error as SocketAddressError.UnknownHost:
            return ("unknown host (\(error.errorDescription))", true)
        case let error as IOError:
            return (String(cString: strerror(error.errnoCode)).lowercased(), false)
        case ChannelError.connectTimeout(let wait):
            return ("no answer within \(RegistryServiceSeconds.words(wait)) seconds", false)
        default:
            return ("\(error)", false)
        }
    }
}

/// Seconds as the messages print them.
enum RegistryServiceSeconds {
    static func words(_ amount: TimeAmount) -> String {
        let seconds = Double(amount.nanoseconds) / 1e9
        return seconds == seconds.rounded() ? "\(Int(seconds))" : String(format: "%.1f", seconds)
    }
}
