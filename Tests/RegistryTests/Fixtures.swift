import Foundation
import Registry
import RegistrySQLite
import TestBackends

/// Where every suite gets its store: the one place a second backend would plug into.
enum TestStore {
    /// A private in-memory store.
    static func inMemory() throws -> SQLiteStore {
        SQLiteStore(try RegistryDatabase.inMemory())
    }

    /// A store on the file at `path`, as another process would open it.
    static func file(_ path: String, feedRetention: Int = Limits().feedRetention) throws -> SQLiteStore {
        SQLiteStore(try RegistryDatabase.open(path: path), feedRetention: feedRetention)
    }
}

/// A registry over a private in-memory database, with one project.
func makeRegistry(limits: Limits = Limits()) async throws -> (RegistryService, Project) {
    let registry = try await RegistryService(store: TestBackend.makeStore(), limits: limits)
    try await registry.startAudience()
    let (project, _) = try await registry.createProject(projectId: "test-app", senderId: "123456789012")
    return (registry, project)
}

/// A well-formed token that looks like FCM's.
func token(_ n: Int) -> String {
    "dev\(n)xxxxxxxxxxxxxxxxx:APA91b" + String(repeating: "Q", count: 20) + "\(n)"
}

/// The repository's top folder, found from this file's path.
let repositoryRoot = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
    .deletingLastPathComponent()
