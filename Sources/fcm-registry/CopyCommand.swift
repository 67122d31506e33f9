import ArgumentParser
import FCMWire
import Foundation
import Registry
import RegistryApp
import Synchronization

/// `fcm-registry copy`: one database's whole registry into another (SQLite to PostgreSQL, or back),
/// as `export | import` would, without the file in between.
struct CopyCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "copy",
        abstract: "Copy a whole registry, keys, relay, mirror and webhooks included, from one database to another.",
        discussion: """
            Reads --from in one consistent snapshot, as export does, and writes --to as import does: in \
            transactions of \(ArchiveImport.batchSize) records, merged with what is there by natural keys, so \
            running it again changes nothing and an interrupted copy is finished by running it again (Ctrl-C \
            ends the batch being written first). Memory \
            stays constant however large the registry. Either side is an SQLite file or a postgres:// URL.
            A URL with a password is best given in $FCM_REGISTRY_COPY_FROM or $FCM_REGISTRY_COPY_TO, out of \
            sight of ps. Example: FCM_REGISTRY_COPY_TO='postgres://registry:…@db:5432/registry' fcm-registry copy \
            --from registry.sqlite. Each project's relay (its settings and own --rate), mirror and webhooks \
            (ids and secrets kept, so receivers verify as before; counters from 0, queued events left behind) \
            are copied at the end; run again, they are brought up to date.
            """
    )

    /// Environment variables for the two databases, so that a URL's password need not be on a
    /// command line, where `ps` shows it to every user of the machine.
    static let fromVariable = "FCM_REGISTRY_COPY_FROM"
    static let toVariable = "FCM_REGISTRY_COPY_TO"

    @Option(name: .customLong("from"), help: "The database to read: an SQLite file or a postgres:// URL (default: $\(fromVariable)).")
    var fromOption: String?
    @Option(
        name: .customLong("to"),
        help: "The database to write: an SQLite file (created if missing) or a postgres:// URL (default: $\(toVariable)).")
    var toOption: String?

    func run() async throws {
        let environment = ProcessInfo.processInfo.environment
        guard let from = fromOption ?? environment[Self.fromVariable] else {
            throw ValidationError(CommandWording.copyFromMissing(variable: Self.fromVariable))
        }
        guard let to = toOption ?? environment[Self.toVariable] else {
            throw ValidationError(CommandWording.copyToMissing(variable: Self.toVariable))
        }
        guard from != to else { throw ValidationError(CommandWording.copySameDatabase) }
        let limits = try DatabaseOptions.environmentLimits()
        let sourceStore = try await StoreFactory.open(from)
        let targetStore = try await StoreFactory.open(to)
        let source = try await RegistryService(store: sourceStore, limits: limits)
        let target = try await RegistryService(store: targetStore, limits: limits)
        // The source's own notification-key secret travels as each project's first keyring, so
        // keys it issued keep working; the target's credentials guard is off: this is a move.
        var session = ArchiveImport(into: target, mergingCredentials: true)
        let pipe = RecordPipe(capacity: ArchiveImport.batchSize * 2)
        let exporting = Task.detached {
            do {
                try await source.export(project: nil, producer: BuildInfo.description) { try pipe.put($0) }
                pipe.finish(nil)
            } catch {
                pipe.finish(error)
            }
        }
        var progress = ProgressLine("copy", total: .count(try await source.exportSize(project: nil)))
        let interruption = Interruption("copy")
        defer { interruption.stop() }
        var line = 0
        do {
            while let records = await pipe.next(upTo: 256) {
                for record in records {
                    line += 1
                    try await session.take(record, line: line)
                }
                progress.update(count: line)
                if interruption.requested { break }
            }
            if interruption.requested { pipe.cancel() }
            await exporting.value
            if let failure = pipe.failure, !interruption.requested { throw failure }
            // Interrupted, this ends the batch being written early.
            let tally = try await session.finish()
            progress.end()
            guard !interruption.requested else {
                try printJSON(CopySummary(records: line, added: tally, settings: nil))
                FileHandle.standardError.write(
                    Data(CommandWording.copyInterrupted(afterRecords: ProgressLine.grouped(line)).utf8))
                throw ExitCode(130)
            }
            // Relay and mirror settings and webhooks hold secrets, which no export file carries:
            // copied store to store.
            let settings = try await copyProjectSettings(from: sourceStore, to: targetStore)
            try printJSON(CopySummary(records: line, added: tally, settings: settings))
        } catch {
            pipe.cancel()
            await exporting.value
            progress.end()
            throw error
        }
    }

    /// The projects' settings, after the records: the tally, and a line on stderr for each
    /// webhook left out.
    private func copyProjectSettings(from source: any RegistryBackend, to target: any RegistryBackend) async throws
        -> ProjectSettingsCopy.Tally
    {
        let tally = try await ProjectSettingsCopy.copy(from: source, to: target)
        for skipped in tally.skipped {
            let why =
                skipped.outcome == .projectFull
                ? CommandWording.webhooksFull(limit: WebhookRules.webhooksPerProject)
                : CommandWording.webhookIDTaken
            FileHandle.standardError.write(
                Data(CommandWording.webhookNotCopied(skipped.webhook, of: skipped.project, why: why).utf8))
        }
        return tally
    }
}

/// What `copy` prints: the records read, what was new in the target, and the projects' settings
/// copied (none when Ctrl-C stopped the copy: they are copied at its end).
private struct CopySummary: Encodable {
    var records: Int
    var added: ImportTally
    var settings: ProjectSettingsCopy.Tally?

    private enum CodingKeys: String, CodingKey {
        case records, added, relays, mirrors, webhooks
    }

    func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(records, forKey: .records)
        try container.encode(added, forKey: .added)
        try container.encodeIfPresent(settings?.relays, forKey: .relays)
        try container.encodeIfPresent(settings?.mirrors, forKey: .mirrors)
        try container.encodeIfPresent(settings?.webhooks, forKey: .webhooks)
    }
}

/// Records handed from an export (a callback on the store's reading thread) to the writing task,
/// at most `capacity` at a time: the reader waits while the writer catches up.
final class RecordPipe: @unchecked Sendable {
    private let condition = NSCondition()
    private let capacity: Int
    private var buffer: [ArchiveRecord] = []
    private var finished = false
    private var cancelled = false
    private var waiting: CheckedContinuation<Void, Never>?
    private(set) var failure: (any Error)?

    init(capacity: Int) {
        self.capacity = capacity
    }

    /// Adds a record, waiting while the pipe is full. Called from the export's thread.
    func put(_ record: ArchiveRecord) throws {
        condition.lock()
        while buffer.count >= capacity && !cancelled { condition.wait() }
        guard !cancelled else {
            condition.unlock()
            throw CancellationError()
        }
        buffer.append(record)
        let reader = waiting
        waiting = nil
        condition.unlock()
        reader?.resume()
    }

    /// The export ended, with `error` when it failed.
    func finish(_ error: (any Error)?) {
        condition.lock()
        finished = true
        failure = error
        let reader = waiting
        waiting = nil
        condition.unlock()
        reader?.resume()
    }

    /// The writer gave up: the export stops at its next record.
    func cancel() {
        condition.lock()
        cancelled = true
        condition.broadcast()
        condition.unlock()
    }

    /// Up to `count` records, waiting for some; `nil` once the export ended and all were taken.
    func next(upTo count: Int) async -> [ArchiveRecord]? {
        while true {
            switch poll(count) {
            case .records(let records): return records
            case .done: return nil
            case .empty: await withCheckedContinuation { wait($0) }
            }
        }
    }

    private enum Poll {
        case records([ArchiveRecord])
        case done
        case empty
    }

    private func poll(_ count: Int) -> Poll {
        condition.lock()
        defer { condition.unlock() }
        if !buffer.isEmpty {
            let taken = Array(buffer.prefix(count))
            buffer.removeFirst(taken.count)
            condition.broadcast()
            return .records(taken)
        }
        return finished ? .done : .empty
    }

    /// Resumes at once when there is something to take, else when `put` or `finish` comes.
    private func wait(_ continuation: CheckedContinuation<Void, Never>) {
        condition.lock()
        guard buffer.isEmpty && !finished else {
            condition.unlock()
            continuation.resume()
            return
        }
        waiting = continuation
        condition.unlock()
    }
}
