/// An import in progress: reads records one at a time, checks them, and writes them in batches,
/// each batch one transaction. A batch with a bad line is refused whole, naming its bad lines;
/// the batches before it stay written, and since writing is idempotent the corrected file can
/// simply be imported again.
public struct ArchiveImport {
    /// Records per transaction: large enough that commits cost little, small enough that a batch's
    /// tokens and their topics stay a few megabytes.
    public static let batchSize = 1_000
    /// Bytes of lines per transaction: a batch of long lines (tokens at the topic limit) is
    /// written sooner, so that memory stays flat whatever the lines hold.
    public static let batchBytes = 32 << 20
    /// Bad lines one refusal lists; the count says how many more there were.
    public static let problemsListed = 10

    private static let headerFirst =
        "the first line must be the header {\"type\":\"header\",\"format\":\"\(ArchiveHeader.format)\",…}: is this an export file?"

    private let registry: RegistryService
    private let updatingAudience: Bool
    private let mergingCredentials: Bool
    private let needsHeader: Bool
    private let checkingOnly: Bool
    private let coder: ArchiveLineCoder
    private var sawHeader = false
    private var batch: [NumberedRecord] = []
    private var problems: [ImportError] = []
    private var problemCount = 0
    private var bytes = 0
    /// What the committed batches wrote.
    public private(set) var tally = ImportTally()
    /// Records read so far, good or bad.
    public private(set) var records = 0

    /// - Parameters:
    ///   - needsHeader: the input is an export file, which starts with its header line.
    ///   - updatingAudience: apply the writes to this process's audience index as well (a server
    ///     does; a command that never loaded the index does not, so that its memory stays flat).
    ///   - mergingCredentials: let the file add server keys, service accounts and keyrings to
    ///     projects the database already has (`import --merge-credentials`).
    ///   - checkingOnly: check each batch as it would be written, in a transaction rolled back at
    ///     its end, and write nothing (`import-groups --check`). Batch by batch rather than in one
    ///     transaction, so that a server on the same database is never held up for long. A full
    ///     batch takes the rows that follow of its last group (see `continuesLastGroup`), so that
    ///     a group whose rows are adjacent is counted once; one whose rows are spread over the
    ///     file is counted once per batch that holds some, as is a token that is a member of
    ///     groups in two batches.
    public init(
        into registry: RegistryService, needsHeader: Bool = true, updatingAudience: Bool = false,
        mergingCredentials: Bool = false, checkingOnly: Bool = false
    ) {
        self.mergingCredentials = mergingCredentials
        self.checkingOnly = checkingOnly
        self.registry = registry
        coder = ArchiveLineCoder(limits: registry.limits)
        self.needsHeader = needsHeader
        self.updatingAudience = updatingAudience
    }

    /// Takes one line of an export file; blank lines are skipped.
    public mutating func take(line: some Collection<UInt8>, number: Int) async throws(ImportFailure) {
        if line.allSatisfy({ $0 == 0x20 || $0 == 0x09 || $0 == 0x0D }) { return }
        bytes += line.count
        let record: ArchiveRecord
        do {
            record = try coder.decode(line)
        } catch {
            records += 1
            let problem = needsHeader && !sawHeader ? "\(Self.headerFirst) (\(error.message))" : error.message
            try await refuse(ImportError(line: number, problem: problem))
            return
        }
        try await take(record, line: number)
    }

    /// Takes one record; writes the batch when it is full.
    public mutating func take(_ record: ArchiveRecord, line: Int) async throws(ImportFailure) {
        records += 1
        let checked: ArchiveRecord
        do throws(ArchiveProblem) {
            checked = try record.validated(limits: registry.limits)
            if case .header = checked {
                guard needsHeader, !sawHeader else { throw ArchiveProblem("a header may only be the first line") }
                sawHeader = true
                return
            }
            guard sawHeader || !needsHeader else {
                throw ArchiveProblem(Self.headerFirst)
            }
        } catch {
            try await refuse(ImportError(line: line, problem: error.message))
            return
        }
        if isFull, !continuesLastGroup(checked) { try await commit() }
        batch.append(NumberedRecord(line: line, record: checked))
        if isFull, !checkingOnly || !Self.isGroup(checked) || batch.count >= 2 * Self.batchSize { try await commit() }
    }

    /// Whether `record` is a row of the group the batch ends with. Checking only, a full batch
    /// of groups waits for such rows (up to a second batch's worth): a CSV lists a group's
    /// members one per row, and a group cut in two would be checked twice, each half as new. (An
    /// import commits each batch, and the second half finds the first.)
    private func continuesLastGroup(_ record: ArchiveRecord) -> Bool {
        guard case .group(let group) = record, case .group(let last) = batch.last?.record else { return false }
        return group.project == last.project && group.name == last.name
    }

    private static func isGroup(_ record: ArchiveRecord) -> Bool {
        if case .group = record { return true }
        return false
    }

    /// The batch holds as many records, good or bad, or as many bytes of lines as one transaction takes.
    private var isFull: Bool {
        batch.count + problemCount >= Self.batchSize || bytes >= Self.batchBytes
    }

    /// Takes one row of an `import-groups` CSV (``GoogleGroupsCSV``); the header row and blank
    /// rows are skipped, a bad row counts against its batch.
    public mutating func take(row: some Collection<UInt8>, number: Int, of csv: inout GoogleGroupsCSV)
        async throws(ImportFailure)
    {
        let record: ArchiveRecord?
        do {
            record = try csv.record(from: row)
        } catch {
            records += 1
            try await refuse(ImportError(line: number, problem: error.message))
            return
        }
        if let record { try await take(record, line: number) }
    }

    /// A line the caller could not read (a CSV row, a line too long): it counts against its batch.
    public mutating func refuse(_ problem: ImportError) async throws(ImportFailure) {
        if problems.count < Self.problemsListed { problems.append(problem) }
        problemCount += 1
        // Without its header, nothing of the file is read: say so at once.
        if isFull || (needsHeader && !sawHeader) { try await commit() }
    }

    /// Writes what is left and ends the import: topics left without subscribers are deleted.
    /// Also how an interrupted import ends its last batch early.
    /// - Returns: what the import wrote (or, checking only, would have written).
    public mutating func finish() async throws(ImportFailure) -> ImportTally {
        if needsHeader, !sawHeader, problemCount == 0 {
            problems = [ImportError(line: 1, problem: "the input is empty: an export file starts with its header")]
            problemCount = 1
        }
        try await commit()
        guard !checkingOnly else { return tally }
        do {
            try await registry.finishImport()
        } catch {
            throw ImportFailure(problems: [], more: 0, written: tally, storeError: "\(error)")
        }
        return tally
    }

    private mutating func commit() async throws(ImportFailure) {
        guard problems.isEmpty else {
            throw await stopped(ImportFailure(problems: problems, more: problemCount - problems.count, written: tally))
        }
        guard !batch.isEmpty else { return }
        do {
            if checkingOnly {
                tally = tally + (try await registry.checkBatch(batch, mergingCredentials: mergingCredentials))
            } else {
                let written = try await registry.importBatch(
                    batch, updatingAudience: updatingAudience, mergingCredentials: mergingCredentials)
                tally = tally + written
            }
        } catch let error as ImportError {
            throw await stopped(ImportFailure(problems: [error], more: 0, written: tally))
        } catch {
            throw await stopped(ImportFailure(problems: [], more: 0, written: tally, storeError: "\(error)"))
        }
        batch.removeAll(keepingCapacity: true)
        bytes = 0
    }

    /// An import that stops still leaves no topic without subscribers behind (the topic records
    /// of the batches written whose tokens did not follow).
    private func stopped(_ failure: ImportFailure) async -> ImportFailure {
        if !checkingOnly, failure.written != ImportTally() { try? await registry.finishImport() }
        return failure
    }
}

/// Why an import stopped: the bad lines of the batch it refused (nothing of that batch was
/// written) and what the batches before it wrote.
public struct ImportFailure: Error, Sendable, CustomStringConvertible {
    public var problems: [ImportError]
    /// Bad lines in the batch beyond those listed.
    public var more: Int
    public var written: ImportTally
    /// The store failed (the disk, the database), not the input.
    public var storeError: String?

    public init(problems: [ImportError], more: Int, written: ImportTally, storeError: String? = nil) {
        self.problems = problems
        self.more = more
        self.written = written
        self.storeError = storeError
    }

    public var description: String {
        var lines = problems.map(\.description)
        if more > 0 { lines.append("… and \(more) more bad line\(more == 1 ? "" : "s") in the same batch") }
        if let storeError { lines.append("the database refused the batch: \(storeError)") }
        return lines.joined(separator: "\n")
    }
}
