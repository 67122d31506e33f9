/// A span of a condition's source text, in UTF-8 bytes.
///
/// Offsets are bytes so that they are cheap to carry on every token and node and mean the same
/// thing in every client; line and column are derived only when a diagnostic is shown.
public struct SourceRange: Sendable, Hashable, Codable {
    /// Byte offset of the first byte.
    public var offset: Int
    /// Length in bytes; zero for a point such as the end of the input.
    public var length: Int

    public init(offset: Int, length: Int) {
        self.offset = offset
        self.length = length
    }

    /// The byte just past the range.
    public var end: Int { offset + length }

    /// The smallest range that covers both.
    public func union(_ other: SourceRange) -> SourceRange {
        let start = min(offset, other.offset)
        return SourceRange(offset: start, length: max(end, other.end) - start)
    }
}

/// A one-based line and column of a byte offset, as a person counts them in an editor.
public struct LineColumn: Sendable, Hashable, Codable {
    public var line: Int
    /// Characters (not bytes) from the start of the line, starting at 1.
    public var column: Int

    /// Locates `offset` in `source`; an offset past the end is placed just after the last character.
    public init(offset: Int, in source: String) {
        var line = 1
        var lineStart = source.utf8.startIndex
        let utf8 = source.utf8
        let target = utf8.index(utf8.startIndex, offsetBy: min(max(offset, 0), utf8.count))
        var index = utf8.startIndex
        while index < target {
            if utf8[index] == UInt8(ascii: "\n") {
                line += 1
                lineStart = utf8.index(after: index)
            }
            index = utf8.index(after: index)
        }
        self.line = line
        // An offset inside a multi-byte character counts up to that character.
        self.column = String(decoding: utf8[lineStart..<target], as: UTF8.self).count + 1
    }
}
