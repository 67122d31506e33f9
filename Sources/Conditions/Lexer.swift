/// Turns condition source into tokens on demand, one `next()` at a time.
///
/// It works on UTF-8 bytes: every character the language uses is ASCII, and byte offsets are
/// what diagnostics carry. Anything else is reported at the byte where it starts.
struct Lexer {
    private let bytes: [UInt8]
    private var position = 0

    init(_ source: String) {
        bytes = Array(source.utf8)
    }

    /// The next token; `.end` forever once the input is used up.
    mutating func next() throws(ConditionError) -> Token {
        skipWhitespace()
        guard position < bytes.count else {
            return Token(kind: .end, range: SourceRange(offset: bytes.count, length: 0))
        }
        let start = position
        let byte = bytes[position]
        switch byte {
        case UInt8(ascii: "'"), UInt8(ascii: "\""):
            return try quotedTopic(quote: byte)
        case UInt8(ascii: "&"), UInt8(ascii: "|"):
            position += 1
            if position < bytes.count, bytes[position] == byte {
                position += 1
                return Token(kind: byte == UInt8(ascii: "&") ? .and : .or, range: range(from: start))
            }
            let single = byte == UInt8(ascii: "&") ? "&" : "|"
            throw ConditionError(
                byte == UInt8(ascii: "&") ? .singleAmpersand : .singleBar,
                "single '\(single)': did you mean '\(single)\(single)'?", at: range(from: start))
        case UInt8(ascii: "!"):
            position += 1
            return Token(kind: .not, range: range(from: start))
        case UInt8(ascii: "("):
            position += 1
            return Token(kind: .leftParenthesis, range: range(from: start))
        case UInt8(ascii: ")"):
            position += 1
            return Token(kind: .rightParenthesis, range: range(from: start))
        default:
            if TopicName.isAllowed(byte) {
                while position < bytes.count, TopicName.isAllowed(bytes[position]) { position += 1 }
                return Token(kind: .word(text(start..<position)), range: range(from: start))
            }
            let (character, length) = scalar(at: start)
            throw ConditionError(
                .unexpectedCharacter, "unexpected character \(character)",
                at: SourceRange(offset: start, length: length))
        }
    }

    // MARK: - Pieces

    private mutating func skipWhitespace() {
        while position < bytes.count {
            switch bytes[position] {
            case UInt8(ascii: " "), UInt8(ascii: "\t"), UInt8(ascii: "\n"), UInt8(ascii: "\r"): position += 1
            default: return
            }
        }
    }

    /// A topic name between matching quotes, checked against FCM's topic-name rules.
    private mutating func quotedTopic(quote: UInt8) throws(ConditionError) -> Token {
        let start = position
        let nameStart = start + 1
        guard let close = bytes[nameStart...].firstIndex(of: quote) else {
            let mark = quote == UInt8(ascii: "'") ? "'" : "\""
            throw ConditionError(
                .unterminatedQuote, "unterminated quote: this \(mark) is never closed",
                at: SourceRange(offset: start, length: 1))
        }
        position = close + 1
        let whole = range(from: start)
        if close == nameStart {
            throw ConditionError(.emptyTopicName, "empty topic name", at: whole)
        }
        if let bad = bytes[nameStart..<close].firstIndex(where: { !TopicName.isAllowed($0) }) {
            let (character, length) = scalar(at: bad)
            throw ConditionError(
                .invalidTopicCharacter,
                "\(character) is not allowed in a topic name (allowed: letters, digits and - _ . ~ %)",
                at: SourceRange(offset: bad, length: length))
        }
        let nameLength = close - nameStart
        if nameLength > TopicName.maximumLength {
            throw ConditionError(
                .topicNameTooLong,
                "topic name is \(nameLength) characters long; the limit is \(TopicName.maximumLength)",
                at: SourceRange(offset: nameStart, length: nameLength))
        }
        return Token(kind: .topic(text(nameStart..<close)), range: whole)
    }

    private func range(from start: Int) -> SourceRange {
        SourceRange(offset: start, length: position - start)
    }

    private func text(_ range: Range<Int>) -> String {
        String(decoding: bytes[range], as: UTF8.self)
    }

    /// The character starting at `offset`, described for a message (`'='`, `'é' (U+00E9)`), and its byte length.
    private func scalar(at offset: Int) -> (description: String, length: Int) {
        let lead = bytes[offset]
        let length =
            switch lead {
            case 0xF0...: 4
            case 0xE0...: 3
            case 0xC0...: 2
            default: 1
            }
        let end = min(offset + length, bytes.count)
        let decoded = String(decoding: bytes[offset..<end], as: UTF8.self)
        guard let value = decoded.unicodeScalars.first else { return ("(invalid byte)", 1) }
        if value == " " { return ("a space", 1) }
        let hex = String(value.value, radix: 16, uppercase: true)
        let code = "U+" + String(repeating: "0", count: max(0, 4 - hex.count)) + hex
        if value.isASCII && value.properties.isWhitespace == false && value.value >= 0x21 && value.value < 0x7F {
            return ("'\(decoded)'", end - offset)
        }
        let printable = value.properties.generalCategory != .control && !value.properties.isWhitespace
        return (printable ? "'\(decoded)' (\(code))" : code, end - offset)
    }
}
