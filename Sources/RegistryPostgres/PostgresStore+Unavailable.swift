import PostgresNIO
import Registry
import _ConnectionPoolModule

/// The postgres-nio errors that mean PostgreSQL is out of reach, for the API's "unavailable".
extension PSQLError: StoreConnectionFailure {
    public var summary: String {
        "\(code)" + (serverInfo?[.sqlState].map { " SQLSTATE \($0)" } ?? "")
    }

    public var meansUnavailable: Bool {
        switch code {
        case .connectionError, .serverClosedConnection, .uncleanShutdown, .poolClosed, .sslUnsupported,
            .failedToAddSSLHandler:
            return true
        case .server:
            // Class 08: connection exceptions; 57P01–57P03: the server shutting down or starting;
            // 53300: too many connections.
            guard let state = serverInfo?[.sqlState] else { return false }
            return state.hasPrefix("08") || ["57P01", "57P02", "57P03", "53300"].contains(state)
        default:
            return false
        }
    }
}

/// The pool gave up connecting: PostgreSQL has refused or not answered connections for a minute.
extension ConnectionPoolError: StoreConnectionFailure {
    public var meansUnavailable: Bool { self == .connectionCreationCircuitBreakerTripped }
    public var summary: String { "no connection could be made for a minute" }
}

/// A transaction that could not begin, or whose body lost the connection, wrote nothing; one
/// that failed while committing may have written.
extension PostgresTransactionError: StoreConnectionFailure {
    public var summary: String {
        let cause = [beginError, closureError, commitError].compactMap { $0 }.first
        return (cause as? any StoreConnectionFailure)?.summary ?? "a transaction failed"
    }

    public var meansUnavailable: Bool {
        guard commitError == nil else { return false }
        for error in [beginError, closureError] {
            if let failure = error as? any StoreConnectionFailure, failure.meansUnavailable { return true }
        }
        return false
    }
}
