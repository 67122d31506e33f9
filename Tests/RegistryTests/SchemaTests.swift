import Foundation
import GRDB
import RegistrySQLite
import Testing

@Suite("Schema")
struct SchemaTests {
    @Test("schema/registry.sql is exactly the schema of a freshly migrated database")
    func checkedInSchemaMatches() throws {
        let checkedIn = try String(
            contentsOf: repositoryRoot.appendingPathComponent("schema/registry.sql"), encoding: .utf8)
        let fresh = try RegistryDatabase.inMemory().schemaSQL()
        #expect(checkedIn == fresh, "regenerate with: swift run fcm-registry schema > schema/registry.sql")
    }

    @Test("A database file is in WAL mode with foreign keys on and synchronous=NORMAL")
    func fileSettings() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("schema-\(UUID()).sqlite").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let database = try RegistryDatabase.open(path: path)
        let (journal, foreignKeys, synchronous) = try database.writer.write { db in
            (
                try String.fetchOne(db, sql: "PRAGMA journal_mode"), try Int.fetchOne(db, sql: "PRAGMA foreign_keys"),
                try Int.fetchOne(db, sql: "PRAGMA synchronous")
            )
        }
        #expect(journal == "wal")
        #expect(foreignKeys == 1)
        #expect(synchronous == 1)
    }
}
