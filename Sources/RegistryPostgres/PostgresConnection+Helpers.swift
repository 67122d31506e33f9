import Foundation
import Logging
import PostgresNIO
import Registry

extension PostgresStore {
    /// Runs `body` in one transaction, committed when it returns and rolled back when it throws:
    /// a request's writes, all or nothing. A unique-constraint violation (another server's write
    /// won a race the checks before it could not see) becomes `onUniqueViolation()`'s error.
    /// A transaction PostgreSQL chose as a deadlock's victim wrote nothing, and runs again: the
    /// rare race of two writes registering the same new tokens while locking known ones.
    func transaction<Result: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection) async throws -> Result,
        onUniqueViolation: (() -> any Error)? = nil
    ) async throws -> Result {
        var attempt = 1
        while true {
            do {
                return try await transactionOnce(body, onUniqueViolation: onUniqueViolation)
            } catch let error as PSQLError where error.serverInfo?[.sqlState] == "40P01" && attempt < 3 {
                attempt += 1
                logger.notice("a write lost a deadlock to another and runs again", metadata: ["attempt": "\(attempt)"])
            }
        }
    }

    private func transactionOnce<Result: Sendable>(
        _ body: @escaping @Sendable (PostgresConnection) async throws -> Result,
        onUniqueViolation: (() -> any Error)?
    ) async throws -> Result {
        do {
            return try await database.withTransaction(logger: logger) { connection in try await body(connection) }
        } catch let error as PSQLError where error.serverInfo?[.sqlState] == "23505" {
            throw onUniqueViolation?() ?? error
        } catch let error as PostgresTransactionError {
            // The body's own error (a rule the registry enforces) passes through as it was thrown.
            if let closureError = error.closureError {
                if let psql = closureError as? PSQLError, psql.serverInfo?[.sqlState] == "23505", let onUniqueViolation {
                    throw onUniqueViolation()
                }
                throw closureError
            }
            throw error
        }
    }
}

extension PostgresConnection {
    /// Runs a statement whose rows, if any, are not needed.
    func run(_ query: PostgresQuery) async throws {
        _ = try await self.query(query, logger: .silent).collect()
    }

    /// Whether the query returns a row.
    func exists(_ query: PostgresQuery) async throws -> Bool {
        try await self.query(query, logger: .silent).collect().first != nil
    }

    /// How many rows the query returns (an `UPDATE … RETURNING 1` counts what it changed).
    func count(_ query: PostgresQuery) async throws -> Int {
        try await self.query(query, logger: .silent).collect().count
    }

    /// The one value of the first row.
    func one<Value: PostgresDecodable & Sendable>(_ query: PostgresQuery, as type: Value.Type) async throws -> Value {
        for try await value in try await self.query(query, logger: .silent).decode(Value.self) {
            return value
        }
        throw PostgresStoreError("the query returned no row")
    }
}

extension Logger {
    /// For queries whose failures are thrown, not logged.
    static let silent = Logger(label: "fcm-registry.postgres", factory: { _ in SwiftLogNoOpLogHandler() })
}

/// A database answer the store cannot use.
public struct PostgresStoreError: Error, Sendable, CustomStringConvertible {
    public var description: String

    init(_ description: String) {
        self.description = description
    }
}

extension PostgresStoreError {
    /// Why no connection could be made, in PostgreSQL's words where it gave them: "28P01 password
    /// authentication failed for user "registry"", "3D000 database "x" does not exist"; never the
    /// password.
    init(cannotConnect error: any Error, location: PostgresLocation, after patience: Duration) {
        let cause: String
        switch error {
        case let error as PSQLError where error.code == .sslUnsupported:
            cause = "the server does not offer TLS, and sslmode=\(location.tls.rawValue) requires it"
        case let error as PSQLError where error.code == .connectionError:
            if let reach = PostgresReach(error, host: location.host, port: location.port) {
                cause = reach.unknownHost ? reach.description : "\(reach) (tried for \(patience))"
            } else {
                cause = "no connection for \(patience): refused or timed out"
            }
        case is DeadlineExceeded:
            cause = "no answer for \(patience)"
        default:
            cause = DatabasePool.summary(of: error)
        }
        self.init(cause)
    }
}
