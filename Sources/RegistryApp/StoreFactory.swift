import Foundation
import Registry
import RegistrySQLite
import ServiceLifecycle

/// What `--db` names, opened: the one way `serve`, every command and the tests get a store, so
/// that a second backend plugs in here.
public enum StoreFactory {
    /// The store at `location`: the path of an SQLite file, created (mode 0600) if missing.
    /// - Throws: `StoreError` naming the location and what went wrong.
    public static func open(_ location: String, feedRetention: Int = Limits().feedRetention) throws
        -> any RegistryBackend
    {
        try openSQLite(location, feedRetention: feedRetention)
    }

    /// What a store runs beside it in `serve`'s service group (SQLite: its group-commit writer).
    public static func services(of store: any RegistryBackend) -> [any Service] {
        (store as? SQLiteStore)?.services ?? []
    }

    /// The SQLite store at `path`, for what only SQLite does (`generate` writes its tables directly).
    public static func openSQLite(_ location: String, feedRetention: Int = Limits().feedRetention) throws
        -> SQLiteStore
    {
        if location.hasPrefix("postgres://") || location.hasPrefix("postgresql://") {
            throw StoreError(location: "a PostgreSQL URL", reason: "this build stores the registry in SQLite only")
        }
        do {
            return SQLiteStore(try RegistryDatabase.open(path: location), feedRetention: feedRetention)
        } catch {
            throw StoreError(location: location, reason: Self.reason(error, opening: location))
        }
    }

    /// A private in-memory store, for tests.
    public static func inMemory(feedRetention: Int = Limits().feedRetention) throws -> SQLiteStore {
        SQLiteStore(try RegistryDatabase.inMemory(), feedRetention: feedRetention)
    }

    /// Why a file could not be opened, in words that point at the fix.
    private static func reason(_ error: any Error, opening path: String) -> String {
        let folder = (path as NSString).deletingLastPathComponent
        var isFolder: ObjCBool = false
        if !folder.isEmpty, !FileManager.default.fileExists(atPath: folder, isDirectory: &isFolder) {
            return "the folder \(folder) does not exist"
        }
        if FileManager.default.fileExists(atPath: path, isDirectory: &isFolder), isFolder.boolValue {
            return "it is a folder"
        }
        return "\(error)"
    }
}

/// A store that could not be opened: where, and why.
public struct StoreError: Error, CustomStringConvertible {
    public var location: String
    public var reason: String

    public var description: String { "cannot open the database \(location): \(reason)" }
}
