extension Diagnostic {
    /// The diagnostic as a person reads it in a terminal, with a caret under the offending text:
    ///
    ///     error: expected "in topics" after the topic name 'weather'; found 'topics'
    ///      --> condition:1:11
    ///     1 | 'weather' topics
    ///       |           ^~~~~~
    ///
    /// A long line is cut to a window around the caret so that megabytes of input print as one line:
    /// at most 40 characters before the caret, an underline of at most 60, and 60 after it, with `…`
    /// where the line goes on. The window is found without walking the line when the line is ASCII up
    /// to the caret (always so for a valid condition), so rendering costs one pass to the caret's
    /// line, not a pass over the whole line.
    /// - Parameters:
    ///   - source: the condition text the diagnostic was made for.
    ///   - name: what to call the source in the location line.
    public func rendered(in source: String, name: String = "condition") -> String {
        rendered(in: source, name: name, at: SourceLocation.locate([range.offset], in: source)[0])
    }

    /// The rendering, with the caret's position already located (see `SourceLocation.locate`).
    func rendered(in source: String, name: String = "condition", at location: SourceLocation) -> String {
        let start = location.lineColumn.column - 1
        let underlineWidth = max(
            1,
            min(
                Self.characterCount(ofBytes: range.length, in: source, from: range.offset),
                Self.contextAfter))
        // Clip to a window of the line around the caret.
        let windowStart = max(0, start - Self.contextBefore)
        let window = Self.window(
            of: source, at: location, skipping: windowStart,
            taking: start - windowStart + underlineWidth + Self.contextAfter)
        let prefix = windowStart > 0 ? "…" : ""
        let suffix = window.lineGoesOn ? "…" : ""
        let caretColumn = start - windowStart + prefix.count
        let gutter = String(location.lineColumn.line)
        let pad = String(repeating: " ", count: gutter.count)
        var text = "\(severity.rawValue): \(message)\n"
        text += "\(pad)--> \(name):\(location.lineColumn.line):\(location.lineColumn.column)\n"
        text += "\(gutter) | \(prefix)\(window.text)\(suffix)\n"
        text +=
            "\(pad) | " + String(repeating: " ", count: caretColumn) + "^"
            + String(repeating: "~", count: underlineWidth - 1) + "\n"
        for note in notes {
            text += "\(pad) = note: \(note)\n"
        }
        return text
    }

    private static let contextBefore = 40
    private static let contextAfter = 60

    /// Up to `count` characters of the located line after its first `skipped`, tabs shown as one
    /// space so that the caret line stays aligned; and whether the line goes on past them.
    private static func window(
        of source: String, at location: SourceLocation, skipping skipped: Int, taking count: Int
    ) -> (text: String, lineGoesOn: Bool) {
        let utf8 = source.utf8
        var index = utf8.index(utf8.startIndex, offsetBy: location.lineStart)
        var toSkip = skipped
        if location.isASCIIBefore && skipped > 0 {
            // Up to the caret the line is one byte per character (no newline, so no CR LF pair), and
            // the window starts before the caret: jump there instead of walking the line.
            index = utf8.index(index, offsetBy: skipped)
            toSkip = 0
        }
        var text = ""
        var taken = 0
        while index < source.endIndex {
            let character = source[index]
            if character == "\n" { break }
            // The line ends before its newline, so a CR LF pair shows as its CR.
            let endsLine = character == "\r\n"
            if toSkip > 0 {
                toSkip -= 1
            } else if taken == count {
                return (text, true)
            } else {
                text.append(character == "\t" ? " " : endsLine ? "\r" : character)
                taken += 1
            }
            if endsLine { break }
            index = source.index(after: index)
        }
        return (text, false)
    }

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
