import Logging
import PostgresNIO
import ServiceLifecycle

/// The registry on PostgreSQL: one `PostgresClient` (a connection pool, a peer in `serve`'s
/// service group) over the tables of `PostgresMigrations`, shared by every server pointed at the
/// same database.
public struct PostgresStore: Sendable {
    public let location: PostgresLocation
    public let client: PostgresClient
    let logger: Logger

    /// A store over the database `location` names. Nothing connects until the client runs.
    /// - Throws: `PostgresLocationError` when the TLS files cannot be read.
    public init(_ location: PostgresLocation, logger: Logger) throws(PostgresLocationError) {
        self.location = location
        self.logger = logger
        client = PostgresClient(configuration: try location.configuration(), backgroundLogger: logger)
    }

    /// What runs beside the store in `serve`'s service group: the connection pool.
    public var services: [any Service] { [client] }

    /// Brings the database's tables up to date; safe when several servers start at once.
    /// - Returns: the migrations applied now.
    public func migrate() async throws -> [String] {
        try await client.withConnection { connection in
            try await PostgresMigrations.migrate(connection, logger: logger)
        }
    }
}
