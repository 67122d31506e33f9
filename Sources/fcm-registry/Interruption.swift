import Dispatch
import FCMWire
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Ctrl-C during a command that writes in batches (`import`, `import-groups`, `copy`). The first
/// SIGINT asks the command to stop once the batch it is writing is committed, so that it can say
/// what is done and that the same command finishes the rest; a second ends the process at once,
/// which still leaves only whole batches, each being one transaction.
final class Interruption: Sendable {
    private let label: String
    private let signals = Mutex(0)
    private nonisolated(unsafe) let source: any DispatchSourceSignal

    /// Takes SIGINT over until ``stop()``.
    init(_ label: String) {
        self.label = label
        source = DispatchSource.makeSignalSource(signal: SIGINT, queue: .global())
        signal(SIGINT, SIG_IGN)
        source.setEventHandler { [weak self] in self?.received() }
        source.resume()
    }

    /// Whether Ctrl-C was pressed.
    var requested: Bool { signals.withLock { $0 > 0 } }

    /// Gives SIGINT back to the system.
    func stop() {
        source.cancel()
        signal(SIGINT, SIG_DFL)
    }

    private func received() {
        let count = signals.withLock { count in
            count += 1
            return count
        }
        if count == 1 {
            FileHandle.standardError.write(Data(CommandWording.stoppingAfterBatch(label).utf8))
        } else {
            FileHandle.standardError.write(Data(CommandWording.stoppedAtOnce(label).utf8))
            signal(SIGINT, SIG_DFL)
            raise(SIGINT)
        }
    }
}
