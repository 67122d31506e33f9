import Foundation
import Registry

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// How far a long command (`copy`, `import`, `import-groups`, `export`, `generate`) has come, on
/// standard error: the count, the total where it is known, the rate and the time left. On a
/// terminal, one line redrawn at most ten times a second; piped or logged (a service, `nohup`),
/// a plain line every ten seconds, so that a log shows the work is alive without filling up.
/// The command's result still goes to standard output alone.
public struct ProgressLine: Sendable {
    /// What the work amounts to, when known in advance.
    public enum Total: Sendable {
        /// Records (or rows) to write: a copy or an export counts them first.
        case count(Int)
        /// Bytes of input to read: an import of a regular file knows its size, not its lines.
        case bytes(Int)
    }

    public enum Display: Sendable {
        /// One line drawn over and over.
        case terminal
        /// A line of its own every ``ProgressLine/logInterval``.
        case log
    }

    /// How often a line is written when standard error is not a terminal.
    public static let logInterval = Duration.seconds(10)
    static let redrawInterval = Duration.milliseconds(100)

    private let label: String
    private let unit: String
    private let total: Total?
    private let display: Display
    private let now: @Sendable () -> ContinuousClock.Instant
    private let write: @Sendable (String) -> Void
    private let started: ContinuousClock.Instant
    private var lastDrawn: ContinuousClock.Instant
    private var drewAny = false

    /// - Parameters:
    ///   - unit: what is counted, in the plural (`records`, `rows`).
    ///   - display: by default, `.terminal` when standard error is one, else `.log`.
    ///   - now: the clock, for tests.
    ///   - write: where the text goes (standard error).
    public init(
        _ label: String, total: Total? = nil, unit: String = "records", display: Display? = nil,
        now: @escaping @Sendable () -> ContinuousClock.Instant = { .now },
        write: @escaping @Sendable (String) -> Void = { FileHandle.standardError.write(Data($0.utf8)) }
    ) {
        self.label = label
        self.unit = unit
        switch total {
        case .count(let value) where value > 0, .bytes(let value) where value > 0: self.total = total
        default: self.total = nil
        }
        self.display = display ?? (isatty(STDERR_FILENO) == 1 ? .terminal : .log)
        self.now = now
        self.write = write
        started = now()
        // A terminal shows the first update at once; a log waits for the first interval.
        lastDrawn = self.display == .terminal ? started - .seconds(1) : started
    }

    /// Takes the count so far (and the bytes read, for a total in bytes); draws when it is time.
    public mutating func update(count: Int, bytes: Int = 0) {
        let instant = now()
        let interval = display == .terminal ? Self.redrawInterval : Self.logInterval
        guard instant - lastDrawn >= interval else { return }
        lastDrawn = instant
        drewAny = true
        let text = Self.describe(
            count: count, of: total, bytes: bytes, unit: unit, elapsed: instant - started)
        switch display {
        case .terminal:
            var line = "\r\u{1B}[2K\(label)"
            if let fraction = Self.fraction(count: count, bytes: bytes, of: total) { line += " " + Self.bar(fraction) }
            write(line + " " + text)
        case .log:
            write("\(label): \(text)\n")
        }
    }

    /// Clears a terminal's line, so that what follows starts on a clean one.
    public func end() {
        guard display == .terminal, drewAny else { return }
        write("\r\u{1B}[2K")
    }

    // MARK: - Text

    /// `123,456 of 400,000 records, 30%, 8,200/s, 2m 05s left`: the count, the total when it is
    /// a count, the share done, the rate, and the time left once a share is known.
    public static func describe(count: Int, of total: Total?, bytes: Int = 0, unit: String, elapsed: Duration)
        -> String
    {
        var parts: [String] = []
        if case .count(let expected) = total {
            parts.append("\(grouped(count)) of \(grouped(max(expected, count))) \(unit)")
        } else {
            parts.append("\(grouped(count)) \(unit)")
        }
        let fraction = fraction(count: count, bytes: bytes, of: total)
        if let fraction { parts.append("\(Int(fraction * 100))%") }
        let seconds = elapsed.seconds
        if seconds >= 1 {
            parts.append("\(grouped(Int((Double(count) / seconds).rounded())))/s")
            if let fraction, fraction > 0 {
                parts.append("\(duration(seconds * (1 - fraction) / fraction)) left")
            }
        }
        return parts.joined(separator: ", ")
    }

    /// A time left: `42s`, `2m 05s`, `1h 07m`.
    public static func duration(_ seconds: Double) -> String {
        let whole = Int(seconds.rounded())
        if whole < 60 { return "\(whole)s" }
        if whole < 3600 { return "\(whole / 60)m \(twoDigits(whole % 60))s" }
        return "\(whole / 3600)h \(twoDigits(whole / 60 % 60))m"
    }

    /// Thousands separated by commas whatever the locale: the text is the same in every log.
    public static func grouped(_ value: Int) -> String {
        let digits = String(value.magnitude)
        var text = ""
        for (index, digit) in digits.enumerated() {
            if index > 0, (digits.count - index) % 3 == 0 { text.append(",") }
            text.append(digit)
        }
        return value < 0 ? "-" + text : text
    }

    private static func twoDigits(_ value: Int) -> String {
        value < 10 ? "0\(value)" : "\(value)"
    }

    private static func fraction(count: Int, bytes: Int, of total: Total?) -> Double? {
        switch total {
        case .count(let expected): min(1, Double(count) / Double(expected))
        case .bytes(let size): min(1, Double(bytes) / Double(size))
        case nil: nil
        }
    }

    private static func bar(_ fraction: Double) -> String {
        let width = 30
        let filled = Int(fraction * Double(width))
        return "[" + String(repeating: "#", count: filled) + String(repeating: ".", count: width - filled) + "]"
    }

    /// The size of a regular file, as a total; `nil` for standard input or a pipe.
    public static func size(of file: String?) -> Total? {
        guard let file, file != "-", let attributes = try? FileManager.default.attributesOfItem(atPath: file),
            attributes[.type] as? FileAttributeType == .typeRegular,
            let size = (attributes[.size] as? NSNumber)?.intValue
        else { return nil }
        return .bytes(size)
    }
}
