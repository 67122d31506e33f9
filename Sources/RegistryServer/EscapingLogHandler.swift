import Logging

/// The server's log handler: swift-log's stream handler on standard error, with every message and
/// metadata value made safe first, wherever it came from. A value from the network (an XMPP user
/// name, a message id, an error that quotes a request) could otherwise carry a newline and forge
/// a whole line, or a space and `key=value` and forge a field, or a megabyte and fill the disk.
public struct EscapingLogHandler: LogHandler {
    /// UTF-8 bytes of one metadata value, or of a message, kept; the rest is counted, not written.
    public static let valueBytes = 256
    public static let messageBytes = 1024

    private var inner: StreamLogHandler
    public var metadataProvider: Logger.MetadataProvider?

    public init(label: String) {
        inner = StreamLogHandler.standardError(label: label, metadataProvider: nil)
        metadataProvider = LoggingSystem.metadataProvider
    }

    public var logLevel: Logger.Level {
        get { inner.logLevel }
        set { inner.logLevel = newValue }
    }

    public var metadata: Logger.Metadata {
        get { inner.metadata }
        set { inner.metadata = newValue.mapValues(Self.escaped) }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { inner[metadataKey: key] }
        set { inner[metadataKey: key] = newValue.map(Self.escaped) }
    }

    public func log(event: LogEvent) {
        var event = event
        var metadata = metadataProvider?.get() ?? [:]
        metadata.merge(event.metadata ?? [:]) { _, explicit in explicit }
        if let error = event.error {
            metadata["error"] = "\(error)"
            event.error = nil
        }
        event.metadata = metadata.isEmpty ? nil : metadata.mapValues(Self.escaped)
        event.message = "\(Self.escapedMessage(event.message.description))"
        inner.log(event: event)
    }

    // MARK: - Escaping

    /// A value as one token of the line: control characters escaped, quoted when it holds a
    /// space, `=` or `"` (so that it cannot pass for another field), and bounded in length.
    static func escaped(_ value: Logger.Metadata.Value) -> Logger.Metadata.Value {
        switch value {
        case .string(let text): .string(escaped(text))
        case .stringConvertible(let convertible): .string(escaped(convertible.description))
        case .array(let values): .array(values.map(escaped))
        case .dictionary(let values): .dictionary(values.mapValues(escaped))
        }
    }

    static func escaped(_ text: String) -> String {
        let body = escapedCharacters(of: text, limit: valueBytes)
        let quoted = body.isEmpty || body.contains(where: { $0 == " " || $0 == "=" || $0 == "\"" })
        return quoted ? "\"" + body.replacingOccurrences(of: "\"", with: "\\\"") + "\"" : body
    }

    /// A message keeps its spaces: only control characters are escaped, and its length bounded.
    static func escapedMessage(_ text: String) -> String {
        escapedCharacters(of: text, limit: messageBytes)
    }

    /// `text` with backslashes and control characters (C0, DEL, C1, and the Unicode line and
    /// paragraph separators) written as escapes, cut after `limit` UTF-8 bytes with a note of
    /// how many more there were.
    private static func escapedCharacters(of text: String, limit: Int) -> String {
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
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case "\u{0}"..."\u{1F}", "\u{7F}"..."\u{9F}", "\u{2028}", "\u{2029}":
                out += "\\u{\(String(scalar.value, radix: 16))}"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out
    }
}
