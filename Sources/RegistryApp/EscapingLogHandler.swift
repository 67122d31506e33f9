import Logging

/// The server's log handler: swift-log's stream handler on standard error, with every message and
/// metadata value made safe first, wherever it came from. A value from the network (an XMPP user
/// name, a message id, an error that quotes a request) could otherwise carry a newline and forge
/// a whole line, or a space and `key=value` and forge a field, or a megabyte and fill the disk.
public struct EscapingLogHandler: LogHandler {
    /// UTF-8 bytes of one metadata value, or of a message, kept; the rest is counted, not written.
    public static let valueBytes = 256
    public static let messageBytes = 1024

    /// Writes the line; it holds no metadata of its own, so that everything goes through escaping.
    private var inner: StreamLogHandler
    public var metadataProvider: Logger.MetadataProvider?
    /// Kept as given and escaped only when a line is written: every request sets its id here,
    /// and most requests write no line at the level in force.
    public var metadata: Logger.Metadata = [:]

    public init(label: String) {
        inner = StreamLogHandler.standardError(label: label, metadataProvider: nil)
        metadataProvider = LoggingSystem.metadataProvider
    }

    public var logLevel: Logger.Level {
        get { inner.logLevel }
        set { inner.logLevel = newValue }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var event = event
        var metadata = self.metadata
        metadata.merge(metadataProvider?.get() ?? [:]) { _, provided in provided }
        metadata.merge(event.metadata ?? [:]) { _, explicit in explicit }
        if let error = event.error {
            metadata["error"] = "\(error)"
            event.error = nil
        }
        event.metadata = metadata.isEmpty ? nil : Self.escaped(metadata)
        event.message = "\(Self.escapedMessage(event.message.description))"
        inner.log(event: event)
    }

    // MARK: - Escaping

    /// Every key and value escaped: a key is written as a value would be.
    static func escaped(_ metadata: Logger.Metadata) -> Logger.Metadata {
        Dictionary(metadata.map { (escaped($0.key), escaped($0.value)) }, uniquingKeysWith: { first, _ in first })
    }

    /// A value as one token of the line: control, format and separator characters escaped,
    /// quoted when it holds a space, `=` or `"` (so that it cannot pass for another field), and
    /// bounded in length. Arrays and dictionaries are written as one such value.
    static func escaped(_ value: Logger.Metadata.Value) -> Logger.Metadata.Value {
        switch value {
        case .string(let text): .string(escaped(text))
        case .stringConvertible(let convertible): .string(escaped(convertible.description))
        case .array, .dictionary: .string(escaped(value.description))
        }
    }

    /// Decided scalar by scalar, never by `Character`: a space followed by a combining mark is
    /// one `Character`, yet it writes a space into the line all the same.
    static func escaped(_ text: String) -> String {
        // A cut value ends in a note with a space: quoted too.
        let quoted =
            text.isEmpty || text.utf8.count > valueBytes
            || text.unicodeScalars.contains { $0 == " " || $0 == "=" || $0 == "\"" }
        let body = escapedScalars(of: text, limit: valueBytes, quotes: quoted)
        return quoted ? "\"" + body + "\"" : body
    }

    /// A message keeps its spaces: only control characters are escaped, and its length bounded.
    static func escapedMessage(_ text: String) -> String {
        escapedScalars(of: text, limit: messageBytes, quotes: false)
    }

    /// `text` with backslashes, `"` (when `quotes`), and control, format and separator
    /// characters other than the plain space (C0, DEL, C1, bidirectional overrides, the Unicode
    /// line and paragraph separators, …) written as escapes; cut after `limit` UTF-8 bytes, with
    /// a note of how many more there were.
    private static func escapedScalars(of text: String, limit: Int, quotes: Bool) -> String {
        // Most of a log line (routes, ids, numbers) is printable ASCII with nothing to escape: it
        // is kept as it is, without a look at each scalar's Unicode properties (a request's line
        // costs a few microseconds less).
        let backslash = UInt8(ascii: "\\"), quote = UInt8(ascii: "\"")
        if text.utf8.count <= limit,
            text.utf8.allSatisfy({ (0x20...0x7E).contains($0) && $0 != backslash && !(quotes && $0 == quote) })
        {
            return text
        }
        var out = ""
        var bytes = 0
        for scalar in text.unicodeScalars {
            let length = UTF8.width(scalar)
            guard bytes + length <= limit else {
                out += "…(+\(text.utf8.count - bytes) bytes)"
                break
            }
            bytes += length
            switch scalar {
            case "\\": out += "\\\\"
            case "\"" where quotes: out += "\\\""
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case " ": out += " "
            case "!"..."~": out.unicodeScalars.append(scalar)
            default:
                switch scalar.properties.generalCategory {
                case .control, .format, .lineSeparator, .paragraphSeparator, .spaceSeparator, .surrogate,
                    .privateUse, .unassigned:
                    out += "\\u{\(String(scalar.value, radix: 16))}"
                default:
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out
    }
}
