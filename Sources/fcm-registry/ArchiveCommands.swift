import ArgumentParser
import FCMWire
import Foundation
import Registry
import RegistryApp
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `fcm-registry export`: the registry, or one project of it, as JSON Lines on standard output
/// or into a file only its owner can read.
struct ExportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract:
            "Write the registry (projects, keys' hashes, tokens, topics, groups) as JSON Lines to stdout or --output.",
        discussion: """
            The file holds what \(Tool.configuration.commandName ?? "") import needs to answer every API call as this \
            database does, including what keeps notification keys valid; never a server key or a private key. \
            It is read from one consistent snapshot while the server runs, in constant memory.
            Example: fcm-registry export --output registry.jsonl
            """
    )

    @Option(name: [.customLong("project"), .customLong("project-id")], help: "Export only this project.")
    var project: String?
    @Option(
        help: """
            Write the file here, created with mode 0600 (it holds the secret that keeps notification keys valid), \
            instead of stdout.
            """)
    var output: String?
    @Flag(help: "Replace the --output file if it exists (once the export is complete).") var force = false
    @OptionGroup var database: DatabaseOptions

    func validate() throws {
        if force, output == nil { throw ValidationError(CommandWording.forceNeedsOutput) }
    }

    func run() async throws {
        let registry = try await database.openRegistry()
        let file = try output.map { try PrivateFile(creating: $0, replacing: force) }
        do {
            let records = try await export(registry, to: OutputBuffer(descriptor: file?.descriptor ?? STDOUT_FILENO))
            try file?.commit()
            let into = output.map { " to \($0)" } ?? ""
            FileHandle.standardError.write(Data("exported \(records) records\(into)\n".utf8))
        } catch {
            file?.discard()
            throw error
        }
    }

    /// - Returns: the records written.
    private func export(_ registry: RegistryService, to output: OutputBuffer) async throws -> Int {
        let coder = ArchiveLineCoder()
        let progress = Mutex(ProgressLine("export", total: .count(try await registry.exportSize(project: project))))
        let count = Mutex(0)
        try await registry.export(project: project, producer: BuildInfo.description) { record in
            try output.writeLine(coder.encode(record))
            let records = count.withLock { count in
                count += 1
                return count
            }
            progress.withLock { $0.update(count: records) }
        }
        try output.flush()
        progress.withLock { $0.end() }
        return count.withLock { $0 }
    }
}

/// `fcm-registry import`: reads an export file into the database, merging with what is there.
struct ImportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Read an export file (JSON Lines) into the database; running it again changes nothing.",
        discussion: """
            Records are merged with what the database holds by their natural keys (project id, topic, token, \
            group name), in transactions of \(ArchiveImport.batchSize) records. A batch with a bad line is \
            refused whole and its bad lines are listed by number; the batches before it stay written, so the \
            corrected file can be imported again. Ctrl-C ends the batch being written and says how far the \
            import came; the same command finishes it. Servers on the same database follow the import as it goes.
            Example: fcm-registry import registry.jsonl
            """
    )

    @Argument(help: "The export file (default: standard input).") var file: String?
    @Flag(help: "Let the file add server keys, service accounts and keyrings to projects already in the database.")
    var mergeCredentials = false
    @OptionGroup var database: DatabaseOptions

    func run() async throws {
        let registry = try await database.openRegistry()
        var session = ArchiveImport(into: registry, mergingCredentials: mergeCredentials)
        let maximumLineBytes = ArchiveLineCoder.maximumLineBytes(for: registry.limits)
        let lines = LineImport(label: "import", file: file, maximumLineBytes: maximumLineBytes) { $0 }
        try await lines.run { line, number in
            switch line {
            case .text(let bytes): try await session.take(line: bytes, number: number)
            case .tooLong:
                try await session.refuse(
                    ImportError(line: number, problem: "the line is longer than \(maximumLineBytes >> 20) MiB"))
            }
            return session.records
        } finish: { _ in
            try await session.finish()
        }
    }
}

/// `fcm-registry import-groups`: device groups read from Google, with Google's notification keys.
struct ImportGroupsCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import-groups",
        abstract: "Create device groups from a CSV read from Google's device-group API; Google's keys keep working.",
        discussion: """
            One row per member: notification_key_name,notification_key,registration_token (a header row is \
            optional). Sends and group operations that name the Google notification key reach the imported \
            group. Running it again changes nothing; Ctrl-C ends the batch being written, and the same command \
            finishes the rest. --check reads every row as the import would, with the same messages and exit \
            status, and writes nothing. See docs/migrate-from-fcm.md.
            Example: fcm-registry import-groups --project my-app --check groups.csv
            """
    )

    @Option(name: [.customLong("project"), .customLong("project-id")], help: "The project the groups belong to.")
    var project: String
    @Flag(help: "Check every row as the import would, and write nothing.") var check = false
    @Argument(help: "The CSV file (default: standard input).") var file: String?
    @OptionGroup var database: DatabaseOptions

    func run() async throws {
        let registry = try await database.openRegistry()
        guard try await registry.projects().contains(where: { $0.projectId == project }) else {
            throw ValidationError(CommandWording.noProjectToImportInto(project))
        }
        var session = ArchiveImport(into: registry, needsHeader: false, checkingOnly: check)
        var rows = GoogleGroupsCSV(project: project)
        let lines = LineImport(
            label: "import-groups", file: file, maximumLineBytes: GoogleGroupsCSV.maximumRowBytes, checkingOnly: check,
            shown: GroupTally.init)
        try await lines.run { line, number in
            switch line {
            case .text(let bytes): try await session.take(row: bytes, number: number, of: &rows)
            case .tooLong: try await session.refuse(ImportError(line: number, problem: GoogleGroupsCSV.rowTooLong.message))
            }
            return session.records
        } finish: { interrupted in
            // An import of nothing would report success: a wrong file, or an export that failed.
            guard rows.dataRows > 0 || interrupted else {
                throw CommandFailure(
                    CommandWording.noGroupRows(in: file, columns: GoogleGroupsCSV.columns))
            }
            return try await session.finish()
        }
    }
}
