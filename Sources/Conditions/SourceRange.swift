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

    init(line: Int, column: Int) {
        self.line = line
        self.column = column
    }

    /// Locates `offset` in `source`; an offset past the end is placed just after the last character.
    public init(offset: Int, in source: String) {
        self = SourceLocation.locate([offset], in: source)[0].lineColumn
    }
}

/// A `LineColumn` with what rendering needs to find the line again without rescanning the source.
struct SourceLocation: Sendable, Hashable {
    var lineColumn: LineColumn
    /// Byte offset of the first byte of the line.
    var lineStart: Int
    /// Whether the line is ASCII from its start up to `offset`, so that columns and bytes coincide there.
    var isASCIIBefore: Bool

    /// Locates every offset in one pass over the source, in the order given.
    ///
    /// A finding's line and column are derived on demand (see `SourceRange`); doing it per finding
    /// would rescan the source from its start each time, which costs the square of the input when a
    /// long condition draws many findings.
    static func locate(_ offsets: [Int], in source: String) -> [SourceLocation] {
        if let located = source.utf8.withContiguousStorageIfAvailable({ locate(offsets, in: $0) }) {
            return located
        }
        return Array(source.utf8).withUnsafeBufferPointer { locate(offsets, in: $0) }
    }

    private static func locate(_ offsets: [Int], in bytes: UnsafeBufferPointer<UInt8>) -> [SourceLocation] {
        let order = offsets.indices.sorted { offsets[$0] < offsets[$1] }
        var located = [SourceLocation](
            repeating: SourceLocation(
                lineColumn: LineColumn(line: 1, column: 1), lineStart: 0, isASCIIBefore: true),
            count: offsets.count)
        var line = 1
        var lineStart = 0
        var isASCII = true
        var position = 0
        for slot in order {
            let target = min(max(offsets[slot], 0), bytes.count)
            while position < target {
                let byte = bytes[position]
                if byte == UInt8(ascii: "\n") {
                    line += 1
                    lineStart = position + 1
                    isASCII = true
                } else if byte >= 0x80 {
                    isASCII = false
                }
                position += 1
            }
            // The slice holds no newline, so ASCII bytes are characters one for one (no CR LF pairs).
            // Otherwise an offset inside a multi-byte character counts up to that character.
            let column =
                isASCII
                ? target - lineStart + 1
                : String(decoding: UnsafeBufferPointer(rebasing: bytes[lineStart..<target]), as: UTF8.self).count + 1
            located[slot] = SourceLocation(
                lineColumn: LineColumn(line: line, column: column), lineStart: lineStart, isASCIIBefore: isASCII)
        }
        return located
    }
}
