import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A one-line progress report on standard error, redrawn at most ten times a second, and only
/// when standard error is a terminal: piped or logged, a command prints only its result.
struct Progress {
    private let label: String
    private let total: Int?
    private let enabled = isatty(STDERR_FILENO) == 1
    private var lastDrawn = ContinuousClock.now - .seconds(1)
    private var drewAny = false

    /// - Parameter total: the bytes the command will read, when known: the bar shows a percentage.
    init(_ label: String, total: Int? = nil) {
        self.label = label
        self.total = total.flatMap { $0 > 0 ? $0 : nil }
    }

    mutating func update(done: Int, records: Int) {
        guard enabled, ContinuousClock.now - lastDrawn >= .milliseconds(100) else { return }
        lastDrawn = .now
        drewAny = true
        var line = "\r\u{1B}[2K\(label)"
        if let total {
            let fraction = min(1, Double(done) / Double(total))
            let width = 30
            let filled = Int(fraction * Double(width))
            line += " [" + String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled) + "]"
            line += " \(Int(fraction * 100))%"
        }
        line += " \(records.formatted()) records"
        FileHandle.standardError.write(Data(line.utf8))
    }

    /// Clears the line, so that what follows starts on a clean one.
    func end() {
        guard enabled, drewAny else { return }
        FileHandle.standardError.write(Data("\r\u{1B}[2K".utf8))
    }

    /// The size of a regular file, to show a percentage; `nil` for standard input or a pipe.
    static func size(of file: String?) -> Int? {
        guard let file, file != "-", let attributes = try? FileManager.default.attributesOfItem(atPath: file),
            attributes[.type] as? FileAttributeType == .typeRegular
        else { return nil }
        return (attributes[.size] as? NSNumber)?.intValue
    }
}
