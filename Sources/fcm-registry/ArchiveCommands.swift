import ArgumentParser
import Foundation
import Registry
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// `fcm-registry export`: the registry, or one project of it, as JSON Lines on standard output.
struct ExportCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Write the registry (projects, keys' hashes, tokens, topics, groups) as JSON Lines to stdout.",
        discussion: """
            The file holds what \(Tool.configuration.commandName ?? "") import needs to answer every API call as this \
            database does, including what keeps notification keys valid; never a server key or a private key. \
            It is read from one consistent snapshot while the server runs, in constant memory.
            Example: fcm-registry export > registry.jsonl
            """
    )

    @Option(name: [.customLong("project"), .customLong("project-id")], help: "Export only this project.")
    var project: String?
    @OptionGroup var database: DatabaseOptions

    func run() async throws {
        let registry = try await database.openRegistry()
        let output = OutputBuffer()
        let coder = ArchiveLineCoder()
        let progress = Mutex(Progress("export"))
        let count = Mutex(0)
        try await registry.export(project: project, producer: BuildInfo.description) { record in
            try output.writeLine(coder.encode(record))
            let records = count.withLock { count in
                count += 1
                return count
            }
            progress.withLock { $0.update(done: 0, records: records) }
        }
        try output.flush()
        progress.withLock { $0.end() }
        FileHandle.standardError.write(Data("exported \(count.withLock { $0 }) records\n".utf8))
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
            corrected file can be imported again. Servers on the same database follow the import as it goes.
            Example: fcm-registry import < registry.jsonl
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
        try await readLines(of: file, label: "import", maximumLineBytes: maximumLineBytes) {
            line, number in
            switch line {
            case .text(let bytes): try await session.take(line: bytes, number: number)
            case .tooLong:
                try await session.refuse(
                    ImportError(line: number, problem: "the line is longer than \(maximumLineBytes >> 20) MiB"))
            }
            return session.records
        } finish: {
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
            group. Running it again changes nothing. See docs/migrate-from-fcm.md.
            Example: fcm-registry import-groups --project my-app groups.csv
            """
    )

    @Option(name: [.customLong("project"), .customLong("project-id")], help: "The project the groups belong to.")
    var project: String
    @Argument(help: "The CSV file (default: standard input).") var file: String?
    @OptionGroup var database: DatabaseOptions

    func run() async throws {
        let registry = try await database.openRegistry()
        guard try await registry.projects().contains(where: { $0.projectId == project }) else {
            throw ValidationError("no project \(project): create it first with `fcm-registry project create`")
        }
        var session = ArchiveImport(into: registry, needsHeader: false)
        var rows = GoogleGroupsCSV(project: project)
        try await readLines(of: file, label: "import-groups", maximumLineBytes: GoogleGroupsCSV.maximumRowBytes) {
            line, number in
            switch line {
            case .text(let bytes): try await session.take(row: bytes, number: number, of: &rows)
            case .tooLong: try await session.refuse(ImportError(line: number, problem: GoogleGroupsCSV.rowTooLong.message))
            }
            return session.records
        } finish: {
            try await session.finish()
        }
    }
}

/// Reads a file (or standard input) line by line into an import, with a progress bar, and prints
/// what it wrote, or why it stopped, as JSON.
private func readLines(
    of file: String?, label: String, maximumLineBytes: Int,
    take: (LineReader.Line, Int) async throws -> Int,
    finish: () async throws -> ImportTally
) async throws {
    let descriptor: Int32
    if let file, file != "-" {
        descriptor = open(file, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else { throw ValidationError("cannot open \(file): \(String(cString: strerror(errno)))") }
    } else {
        descriptor = STDIN_FILENO
    }
    defer { if descriptor != STDIN_FILENO { close(descriptor) } }
    var reader = LineReader(descriptor: descriptor, maximumLineBytes: maximumLineBytes)
    var progress = Progress(label, total: Progress.size(of: file))
    let started = ContinuousClock.now
    do {
        var records = 0
        while let line = try reader.next() {
            records = try await take(line, reader.lineNumber)
            progress.update(done: reader.bytesRead, records: records)
        }
        let tally = try await finish()
        progress.end()
        try printJSON(ImportSummary(lines: reader.lineNumber, added: tally, seconds: started.duration(to: .now).seconds))
    } catch let failure as ImportFailure {
        progress.end()
        FileHandle.standardError.write(Data("\(label) stopped:\n\(failure)\n".utf8))
        if failure.storeError == nil {
            FileHandle.standardError.write(
                Data(
                    "nothing of the batch holding those lines was written; the batches before it were. Fix the file and run the import again: it is idempotent.\n"
                        .utf8))
        }
        try printJSON(ImportSummary(lines: reader.lineNumber, added: failure.written, seconds: nil))
        throw ExitCode.failure
    }
}

/// What `import` and `import-groups` print: the lines read and what was new.
private struct ImportSummary: Encodable {
    var lines: Int
    var added: ImportTally
    var seconds: Double?
}

extension Duration {
    fileprivate var seconds: Double {
        Double(components.seconds) + Double(components.attoseconds) / 1e18
    }
}
