import FCMWire
import Foundation
import Logging
import Registry
import RegistryPostgres
import RegistrySQLite
import ServiceLifecycle

/// What `--db` names, opened: the one way `serve`, every command and the tests get a store, so
/// that a second backend plugs in here.
public enum StoreFactory {
    /// The store at `location`: a `postgres://` URL, or the path of an SQLite file, created
    /// (mode 0600) if missing. A PostgreSQL database is reached first (a refused connection is
    /// tried again for `postgresPatience`, a server restarting; an unknown host, a wrong password
    /// or TLS mismatch fail at once, in the resolver's or PostgreSQL's words), then migrated before
    /// it is handed over (safe when several servers start at once), and its connection pool runs
    /// from here on.
    /// - Throws: `StoreError` naming the location (never a password) and what went wrong.
    public static func open(
        _ location: String, feedRetention: Int = Limits().feedRetention,
        logger: Logger = Logger(label: "fcm-registry.store")
    ) async throws -> any RegistryBackend {
        guard PostgresLocation.isURL(location) else { return try openSQLite(location, feedRetention: feedRetention) }
        let url: PostgresLocation
        let store: PostgresStore
        do {
            url = try PostgresLocation(parsing: location)
            store = try PostgresStore(url, feedRetention: feedRetention, logger: logger)
        } catch {
            throw StoreError(location: ConfigurationWording.aPostgreSQLURL, reason: error.description)
        }
        do {
            try await store.connect(patience: postgresPatience)
        } catch {
            await store.close()
            throw StoreError(location: url.description, reason: "\(error)")
        }
        do {
            let applied = try await store.migrate()
            if !applied.isEmpty { logger.info("database migrated", metadata: ["db.migrations": "\(applied)"]) }
        } catch {
            throw StoreError(location: url.description, reason: "\(String(reflecting: error))")
        }
        return store
    }

    /// How long a refused connection to PostgreSQL is tried again at start: long enough for a
    /// server that restarts, short enough that a wrong port or a stopped server is said within 3 s.
    public static let postgresPatience = Duration.milliseconds(2500)

    /// `location` as logs may show it: a PostgreSQL URL without its password.
    public static func describe(_ location: String) -> String {
        guard PostgresLocation.isURL(location) else { return location }
        return (try? PostgresLocation(parsing: location))?.description ?? ConfigurationWording.aPostgreSQLURL
    }

    /// What a store runs beside it in `serve`'s service group (SQLite: its group-commit writer;
    /// PostgreSQL: its connection pool, stopped after the listeners).
    public static func services(of store: any RegistryBackend) -> [any Service] {
        (store as? SQLiteStore)?.services ?? (store as? PostgresStore)?.services ?? []
    }

    /// The SQLite store at `path`, for what only SQLite does (`generate` writes its tables directly).
    public static func openSQLite(_ location: String, feedRetention: Int = Limits().feedRetention) throws
        -> SQLiteStore
    {
        if PostgresLocation.isURL(location) {
            throw StoreError(location: ConfigurationWording.aPostgreSQLURL, reason: ConfigurationWording.sqliteOnly)
        }
        if let problem = problem(opening: location) { throw StoreError(location: location, reason: problem) }
        do {
            return SQLiteStore(try RegistryDatabase.open(path: location), feedRetention: feedRetention)
        } catch let error as NotARegistryDatabase {
            throw StoreError(location: location, reason: error.reason, isForeign: true)
        } catch {
            throw StoreError(location: location, reason: "\(error)")
        }
    }

    /// Why `path` cannot be an SQLite file, in words that point at the fix; `nil` when it can
    /// (an existing file, or a new one in an existing folder) or is a PostgreSQL URL. Asked
    /// before SQLite is, which would create the file or answer only "unable to open database file".
    public static func problem(opening path: String) -> String? {
        guard !PostgresLocation.isURL(path) else { return nil }
        var isFolder: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isFolder) {
            guard isFolder.boolValue else { return nil }
            let folder = path.count > 1 && path.hasSuffix("/") ? String(path.dropLast()) : path
            return ConfigurationWording.databaseIsAFolder(example: "\(folder == "/" ? "" : folder)/registry.sqlite")
        }
        let folder = folder(of: path)
        guard FileManager.default.fileExists(atPath: folder, isDirectory: &isFolder) else {
            return ConfigurationWording.folderMissing(folder)
        }
        return isFolder.boolValue ? nil : ConfigurationWording.notAFolder(folder)
    }

    /// The folder `path` is in. Not `NSString.deletingLastPathComponent`, which traps on a
    /// one-character path in swift-corelibs-foundation (`--db a` crashed with "Illegal instruction").
    static func folder(of path: String) -> String {
        var path = Substring(path)
        while path.count > 1, path.hasSuffix("/") { path = path.dropLast() }
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// A private in-memory store, for tests.
    public static func inMemory(feedRetention: Int = Limits().feedRetention) throws -> SQLiteStore {
        SQLiteStore(try RegistryDatabase.inMemory(), feedRetention: feedRetention)
    }
}

/// A store that could not be opened: where, and why.
public struct StoreError: Error, CustomStringConvertible {
    public var location: String
    public var reason: String
    /// The file is there but holds no fcm-registry database (it was left as it was).
    public var isForeign: Bool

    public init(location: String, reason: String, isForeign: Bool = false) {
        self.location = location
        self.reason = reason
        self.isForeign = isForeign
    }

    public var description: String {
        isForeign
            ? ConfigurationWording.notARegistryDatabase(location, reason: reason)
            : ConfigurationWording.cannotOpenDatabase(location, reason: reason)
    }
}
