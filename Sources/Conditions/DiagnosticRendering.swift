extension Diagnostic {
    /// The diagnostic as a person reads it in a terminal, with a caret under the offending text:
    ///
    ///     error: expected "in topics" after the topic name 'weather'; found 'topics'
    ///      --> condition:1:11
    ///     1 | 'weather' topics
    ///       |           ^~~~~~
    ///
    /// A long line is cut to a window around the caret so that megabytes of input print as one line.
    /// - Parameters:
    ///   - source: the condition text the diagnostic was made for.
    ///   - name: what to call the source in the location line.
    public func rendered(in source: String, name: String = "condition") -> String {
        let location = LineColumn(offset: range.offset, in: source)
        let line = Self.line(containing: range.offset, in: source)
        let start = location.column - 1
        let underlineWidth = max(
            1,
            min(
                Self.characterCount(ofBytes: range.length, in: source, from: range.offset),
                Self.contextAfter))
        // Clip to a window of the line around the caret.
        let windowStart = max(0, start - Self.contextBefore)
        let window = line.dropFirst(windowStart).prefix(start - windowStart + underlineWidth + Self.contextAfter)
        let prefix = windowStart > 0 ? "…" : ""
        let suffix = line.dropFirst(windowStart + window.count).isEmpty ? "" : "…"
        let caretColumn = start - windowStart + prefix.count
        let gutter = String(location.line)
        let pad = String(repeating: " ", count: gutter.count)
        var text = "\(severity.rawValue): \(message)\n"
        text += "\(pad)--> \(name):\(location.line):\(location.column)\n"
        text += "\(gutter) | \(prefix)\(window.replacingTabs)\(suffix)\n"
        text +=
            "\(pad) | " + String(repeating: " ", count: caretColumn) + "^"
            + String(repeating: "~", count: underlineWidth - 1) + "\n"
        for note in notes {
            text += "\(pad) = note: \(note)\n"
        }
        return text
    }

    /// The line of `source` in which byte `offset` stands, without its newline.
    private static func line(containing offset: Int, in source: String) -> Substring {
        let utf8 = source.utf8
        let at = utf8.index(utf8.startIndex, offsetBy: min(max(offset, 0), utf8.count))
        let lineStart = utf8[..<at].lastIndex(of: UInt8(ascii: "\n")).map { utf8.index(after: $0) } ?? utf8.startIndex
        let lineEnd = utf8[at...].firstIndex(of: UInt8(ascii: "\n")) ?? utf8.endIndex
        return source[lineStart..<lineEnd]
    }

    private static let contextBefore = 40
    private static let contextAfter = 60

    private static func characterCount(ofBytes length: Int, in source: String, from offset: Int) -> Int {
        let utf8 = source.utf8
        let lower = utf8.index(utf8.startIndex, offsetBy: min(offset, utf8.count))
        // Only the visible part of the underline matters; a range may cover megabytes.
        let visibleBytes = min(length, 4 * contextAfter, utf8.distance(from: lower, to: utf8.endIndex))
        let upper = utf8.index(lower, offsetBy: visibleBytes)
        let text = String(decoding: utf8[lower..<upper], as: UTF8.self)
        return text.prefix(while: { $0 != "\n" }).count
    }
}

extension Substring {
    /// Tabs shown as one space, so that the caret line stays aligned with the source line.
    fileprivate var replacingTabs: String {
        String(map { $0 == "\t" ? " " : $0 })
    }
}
