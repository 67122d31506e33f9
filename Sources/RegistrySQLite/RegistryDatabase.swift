import Foundation
import GRDB

/// The SQLite database: opened, configured and migrated in one place.
public struct RegistryDatabase: Sendable {
    public let writer: any DatabaseWriter

    /// Migrates `writer` to the current schema.
    public init(_ writer: any DatabaseWriter) throws {
        self.writer = writer
        try Migrations.migrator.migrate(writer)
    }

    /// Opens (or creates) the database file at `path`: WAL, foreign keys, a busy timeout (5 s) so that
    /// command-line readers and the server share it, and `synchronous=NORMAL`, under which a
    /// committed transaction survives a crash of the process (WAL is written before the commit
    /// returns); only a power loss can take back the last commits. Each connection caches up to
    /// 16 MiB of pages.
    ///
    /// A new file is created readable by its owner only (it holds every token and the key
    /// secret); SQLite gives the `-wal` and `-shm` files the same mode.
    public static func open(path: String, busyTimeout: Double = 5) throws -> RegistryDatabase {
        if !FileManager.default.fileExists(atPath: path) {
            _ = FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600])
        }
        var configuration = Configuration()
        configuration.foreignKeysEnabled = true
        configuration.busyMode = .timeout(busyTimeout)
        configuration.prepareDatabase { db in
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
            // 16 MiB of pages per connection (SQLite's default is 2 MiB): a page of an audience
            // looks up 1,000 tokens spread over the table, and with the pages it touched cached
            // here the next page or the same one again costs a quarter as much.
            try db.execute(sql: "PRAGMA cache_size = -16384")
        }
        let pool = try DatabasePool(path: path, configuration: configuration)
        // DatabasePool sets its own synchronous level after prepareDatabase: set it again on the writer.
        try pool.writeWithoutTransaction { db in
            try db.execute(sql: "PRAGMA synchronous = NORMAL")
        }
        return try RegistryDatabase(pool)
    }

    /// A private in-memory database, for tests.
    public static func inMemory() throws -> RegistryDatabase {
        var configuration = Configuration()
        configuration.foreignKeysEnabled = true
        return try RegistryDatabase(DatabaseQueue(configuration: configuration))
    }

    /// The schema as `schema/registry.sql` holds it: every table, index and view, in creation order.
    public func schemaSQL() throws -> String {
        try writer.read { db in
            let statements = try String.fetchAll(
                db,
                sql: """
                    SELECT sql FROM sqlite_master
                    WHERE sql IS NOT NULL AND name NOT LIKE 'sqlite_%' AND name != 'grdb_migrations'
                    ORDER BY rowid
                    """)
            return statements.map { $0 + ";\n" }.joined(separator: "\n")
        }
    }
}
