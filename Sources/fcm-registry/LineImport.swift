import ArgumentParser
import FCMWire
import Foundation
import Registry
import RegistryApp

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A file (or standard input) read line by line into an import (`import`, `import-groups`), with
/// its progress line, Ctrl-C ending the current batch, and the JSON it prints: what was written,
/// or why it stopped.
struct LineImport<Tally: Encodable> {
    var label: String
    var file: String?
    var maximumLineBytes: Int
    /// `import-groups --check`: the words say nothing was written.
    var checkingOnly = false
    /// What the JSON shows of a tally.
    var shown: (ImportTally) -> Tally

    /// Reads every line into `take`, which returns the records read so far, then calls `finish`
    /// (told whether Ctrl-C cut the input short), and prints the summary.
    /// - Throws: `ExitCode.failure` once an `ImportFailure` is reported; `ExitCode(130)` after Ctrl-C.
    func run(
        take: (LineReader.Line, Int) async throws -> Int,
        finish: (_ interrupted: Bool) async throws -> ImportTally
    ) async throws {
        let descriptor: Int32
        if let file, file != "-" {
            descriptor = open(file, O_RDONLY | O_CLOEXEC)
            guard descriptor >= 0 else {
                throw CommandFailure(CommandWording.cannotOpen(file, reason: String(cString: strerror(errno))))
            }
        } else {
            descriptor = STDIN_FILENO
        }
        defer { if descriptor != STDIN_FILENO { close(descriptor) } }
        // Lines typed at a terminal are no long work: there Ctrl-C stops the command as usual.
        let interruption = isatty(descriptor) == 1 ? nil : Interruption(label)
        defer { interruption?.stop() }
        var reader = LineReader(descriptor: descriptor, maximumLineBytes: maximumLineBytes)
        var progress = ProgressLine(label, total: ProgressLine.size(of: file))
        let started = ContinuousClock.now
        do {
            while let line = try reader.next() {
                let records = try await take(line, reader.lineNumber)
                progress.update(count: records, bytes: reader.bytesRead)
                if interruption?.requested == true { break }
            }
            // A pipe's writer that Ctrl-C ended closes the input early: that is an interruption too.
            let interrupted = interruption?.requested == true
            let tally = try await finish(interrupted)
            progress.end()
            try printJSON(summary(lines: reader.lineNumber, tally, seconds: started.duration(to: .now).seconds))
            if interrupted {
                FileHandle.standardError.write(Data("\(interruptedNote(after: reader.lineNumber))\n".utf8))
                throw ExitCode(130)
            }
        } catch let failure as ImportFailure {
            progress.end()
            FileHandle.standardError.write(Data(CommandWording.importStopped(label, failure: "\(failure)").utf8))
            if failure.storeError == nil {
                let note =
                    checkingOnly
                    ? CommandWording.checkWroteNothing : CommandWording.importBatchNotWritten
                FileHandle.standardError.write(Data("\(note)\n".utf8))
            }
            try printJSON(summary(lines: reader.lineNumber, failure.written, seconds: nil))
            throw ExitCode.failure
        }
    }

    private func summary(lines: Int, _ tally: ImportTally, seconds: Double?) -> ImportSummary<Tally> {
        ImportSummary(
            lines: lines, added: checkingOnly ? nil : shown(tally), wouldAdd: checkingOnly ? shown(tally) : nil,
            seconds: seconds)
    }

    /// What an import stopped by Ctrl-C says after its summary.
    private func interruptedNote(after line: Int) -> String {
        let number = ProgressLine.grouped(line)
        if checkingOnly {
            return CommandWording.checkInterrupted(label, afterLine: number)
        }
        return CommandWording.importInterrupted(label, afterLine: number)
    }
}

/// What `import` and `import-groups` print: the lines read and what was new (with `--check`,
/// what would be).
struct ImportSummary<Tally: Encodable>: Encodable {
    var lines: Int
    var added: Tally?
    var wouldAdd: Tally?
    var seconds: Double?
}

/// What `import-groups` reports of a tally: only what a CSV of groups can add.
struct GroupTally: Encodable {
    var groups: Int
    var members: Int
    var notificationKeys: Int
    var tokens: Int

    init(_ tally: ImportTally) {
        groups = tally.groups
        members = tally.members
        notificationKeys = tally.notificationKeys
        tokens = tally.tokens
    }
}
