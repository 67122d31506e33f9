import ArgumentParser
import FCMWire
import Foundation
import Registry
import RegistryApp
import RegistryPostgres
import RegistrySQLite
import Synchronization

/// `fcm-registry generate`: a reproducible synthetic registry for benchmarks.
struct GenerateCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "generate",
        abstract: "Fill a new database with a seeded synthetic registry (skewed topic popularity).",
        discussion:
            "Example: fcm-registry generate --db bench.sqlite --tokens 1000000 --topics 10000 --subscriptions 5000000. "
            + "--db may be a postgres:// URL to a database with no projects."
    )

    @Option(help: "Tokens.") var tokens = 1_000_000
    @Option(help: "Topics.") var topics = 10_000
    @Option(help: "Subscriptions, about.") var subscriptions = 5_000_000
    @Option(help: "Random seed: the same seed gives the same registry.") var seed: UInt64 = 1
    @OptionGroup var database: DatabaseOptions

    func validate() throws {
        guard tokens > 0, topics > 0, subscriptions >= topics else {
            throw ValidationError(CommandWording.generateCounts)
        }
    }

    func run() async throws {
        let location = database.resolvedPath
        let isURL = PostgresLocation.isURL(location)
        if let problem = StoreFactory.problem(opening: location) {
            throw StoreError(location: location, reason: problem)
        }
        guard isURL || !FileManager.default.fileExists(atPath: location) else {
            throw ValidationError(CommandWording.databaseExists(location))
        }
        let started = Date()
        let generator = SyntheticRegistry(tokens: tokens, topics: topics, subscriptions: subscriptions, seed: seed)
        let progress = Mutex(ProgressLine("generate", total: .count(generator.rowCount()), unit: "rows"))
        let report: @Sendable (Int) -> Void = { rows in progress.withLock { $0.update(count: rows) } }
        let (project, key): (Project, String)
        if isURL {
            // A PostgreSQL database with no projects yet (it refuses one that has any).
            let store = try await StoreFactory.open(location)
            guard let postgres = store as? PostgresStore else {
                throw ValidationError(CommandWording.notPostgreSQL(location))
            }
            do {
                (project, key) = try await generator.generate(into: postgres, progress: report)
            } catch {
                await postgres.close()
                progress.withLock { $0.end() }
                throw error
            }
            await postgres.close()
        } else {
            do {
                (project, key) = try await generator.generate(into: StoreFactory.openSQLite(location), progress: report)
            } catch {
                progress.withLock { $0.end() }
                throw error
            }
        }
        progress.withLock { $0.end() }
        FileHandle.standardError.write(
            Data(
                "generated \(tokens) tokens, \(topics) topics, \(generator.topicSizes().reduce(0, +)) subscriptions in \(Int(Date().timeIntervalSince(started))) s\n"
                    .utf8))
        try printJSON(ProjectCommand.Created(project: project, serverKey: key))
    }
}
