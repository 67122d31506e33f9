import ArgumentParser
import FCMWire
import Foundation
import Registry
import RegistryApp

/// An error a command words itself: one line on standard error, and the exit status it calls for.
struct CommandFailure: Error, CustomStringConvertible {
    var description: String
    var status: Int32 = 1

    init(_ description: String, status: Int32 = 1) {
        self.description = description
        self.status = status
    }
}

/// What a user sees of an error a command's `run` throws: one line on standard error, never
/// usage text or a backtrace, and a status by kind. 2 when the database (`--db`) cannot be
/// opened, as `serve` stops on a bad value; 64 for a `ValidationError` (a value the command
/// cannot use), as ArgumentParser gives it; the error's own status for a ``CommandFailure``;
/// 1 for anything else.
enum ErrorReport {
    /// Writes the line and returns the `ExitCode` to end with. ArgumentParser's own errors pass
    /// through as they are: statuses, clean exits, and the help a subcommand's `--help` throws
    /// from its `run` (an internal type, known only by its module).
    static func reported(_ error: any Error) -> any Error {
        let (message, status): (String, Int32)
        switch error {
        case is ExitCode, is CleanExit: return error
        case _ where String(reflecting: type(of: error)).hasPrefix("ArgumentParser.") && !(error is ValidationError):
            return error
        case let error as StoreError: (message, status) = (error.description, 2)
        case let error as ValidationError: (message, status) = (error.message, ExitCode.validationFailure.rawValue)
        case let error as CommandFailure: (message, status) = (error.description, error.status)
        // A refusal in the words the native API gives it (`FCMWire/RefusalWording.swift`).
        case let error as RegistryError: (message, status) = (error.wording.message, ExitCode.failure.rawValue)
        default: (message, status) = (String(describing: error), ExitCode.failure.rawValue)
        }
        FileHandle.standardError.write(Data(CommandWording.errorLine(oneLine(message)).utf8))
        return ExitCode(status)
    }

    /// A message's lines joined into one, so that a log keeps it whole.
    static func oneLine(_ message: String) -> String {
        message.split(whereSeparator: \.isNewline).map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty }.joined(separator: "; ")
    }
}
