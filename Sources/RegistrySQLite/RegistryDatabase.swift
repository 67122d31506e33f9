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
    ///
    /// - Throws: `NotARegistryDatabase` for a file that is not an SQLite database, or is one of
    ///   another application (tables, none of them fcm-registry's): never migrated into.
    public static func open(path: String, busyTimeout: Double = 5) throws -> RegistryDatabase {
        if !FileManager.default.fileExists(atPath: path) {
            _ = FileManager.default.createFile(atPath: path, contents: nil, attributes: [.posixPermissions: 0o600])
        } else if !holdsSQLite(path) {
            // SQLite would say only "error 26: file is not a database - while executing PRAGMA synchronous".
            throw NotARegistryDatabase(path: path, reason: "it is not an SQLite file")
        } else if let tables = try otherApplicationsTables(at: path) {
            throw NotARegistryDatabase(
                path: path, reason: "it is an SQLite database of something else (tables \(tables))")
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

    /// Whether the file starts as every SQLite database does, or is empty (a new database).
    static func holdsSQLite(_ path: String) -> Bool {
        guard let file = FileHandle(forReadingAtPath: path) else { return true }  // SQLite says why.
        defer { try? file.close() }
        let head = (try? file.read(upToCount: 16)) ?? Data()
        return head.isEmpty || head == Data("SQLite format 3\0".utf8)
    }

    /// The name of fcm-registry's first migration, which every database of it has had.
    static let firstMigration = "v1 projects, tokens, groups, topics"

    /// The first tables of a database that has tables but never had fcm-registry's first
    /// migration; `nil` for an empty database or one of fcm-registry. Read through a read-only
    /// connection, before the pool would switch the file to WAL.
    static func otherApplicationsTables(at path: String) throws -> String? {
        guard let size = try? FileManager.default.attributesOfItem(atPath: path)[.size] as? Int, size > 0 else {
            return nil
        }
        var configuration = Configuration()
        configuration.readonly = true
        return try DatabaseQueue(path: path, configuration: configuration).read(otherApplicationsTables)
    }

    static func otherApplicationsTables(_ db: Database) throws -> String? {
        let tables = try String.fetchAll(
            db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY rowid")
        guard !tables.isEmpty else { return nil }
        if tables.contains("grdb_migrations"),
            try Bool.fetchOne(
                db, sql: "SELECT 1 FROM grdb_migrations WHERE identifier = ?",
                arguments: [firstMigration]) == true
        {
            return nil
        }
        return tables.prefix(3).joined(separator: ", ") + (tables.count > 3 ? ", …" : "")
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

/// A `--db` file that is not an fcm-registry database: nothing was written to it.
public struct NotARegistryDatabase: Error, Sendable, Equatable, CustomStringConvertible {
    public var path: String
    public var reason: String

    public init(path: String, reason: String) {
        self.path = path
        self.reason = reason
    }

    public var description: String { "\(path) is not a fcm-registry database: \(reason)" }
}
