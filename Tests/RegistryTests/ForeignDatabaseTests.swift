import Foundation
import GRDB
import RegistrySQLite
import Testing

/// `--db` naming a file that holds no fcm-registry database: refused in words that say so, and
/// left as it was (never migrated into, nor switched to WAL).
@Suite("A file that is not a fcm-registry database")
struct ForeignDatabaseTests {
    static func scratch(_ name: String) -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("foreign-\(UUID().uuidString)-\(name)").path
    }

    @Test("Bytes that are not SQLite: not a fcm-registry database, not SQLite's error 26")
    func notSQLite() throws {
        let path = Self.scratch("notes.txt")
        defer { try? FileManager.default.removeItem(atPath: path) }
        try Data("these are notes\n".utf8).write(to: URL(fileURLWithPath: path))
        #expect(throws: NotARegistryDatabase(path: path, reason: "it is not an SQLite file")) {
            try RegistryDatabase.open(path: path)
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == Data("these are notes\n".utf8))
    }

    @Test("An SQLite database of something else: refused, its tables named, the file unchanged")
    func otherApplication() throws {
        let path = Self.scratch("photos.sqlite")
        defer { try? FileManager.default.removeItem(atPath: path) }
        try DatabaseQueue(path: path).write { db in
            try db.execute(sql: "CREATE TABLE photo (id INTEGER PRIMARY KEY); CREATE TABLE album (id INTEGER)")
        }
        let before = try Data(contentsOf: URL(fileURLWithPath: path))
        #expect(
            throws: NotARegistryDatabase(
                path: path, reason: "it is an SQLite database of something else (tables photo, album)")
        ) {
            try RegistryDatabase.open(path: path)
        }
        #expect(try Data(contentsOf: URL(fileURLWithPath: path)) == before)
    }

    @Test("An empty file, and a registry's own file, open as before")
    func ownFiles() throws {
        let path = Self.scratch("registry.sqlite")
        defer {
            for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) }
        }
        #expect(FileManager.default.createFile(atPath: path, contents: nil))
        _ = try RegistryDatabase.open(path: path)
        _ = try RegistryDatabase.open(path: path)
    }
}
