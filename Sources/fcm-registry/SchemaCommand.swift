import ArgumentParser
import RegistrySQLite

/// `fcm-registry schema`: the SQL of a freshly migrated database, which `schema/registry.sql` holds.
struct SchemaCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "schema",
        abstract: "Print the schema of a freshly migrated database (what schema/registry.sql holds).")

    func run() throws {
        print(try RegistryDatabase.inMemory().schemaSQL(), terminator: "")
    }
}
