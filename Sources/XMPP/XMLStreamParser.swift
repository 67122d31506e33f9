/// What an XMPP stream parser hands on: the stream header, each complete top-level stanza, and
/// the end of the stream.
public enum XMLStreamEvent: Sendable, Equatable {
    /// `<stream:stream …>`: the element has the header's attributes and no children.
    case streamOpened(XMPPElement)
    /// A complete child of the stream (`<message>`, `<iq>`, `<auth>`, …) with its whole subtree.
    case stanza(XMPPElement)
    /// `</stream:stream>`.
    case streamClosed
}

/// Why a stream was refused, with the stream error condition of RFC 6120 §4.9.3 to answer.
public struct XMLStreamError: Error, Equatable, CustomStringConvertible {
    public enum Condition: String, Sendable {
        case notWellFormed = "not-well-formed"
        /// Comments, processing instructions, DTDs, entity declarations and references (RFC 6120 §11.1).
        case restrictedXML = "restricted-xml"
        /// A stanza over the size or depth limit.
        case policyViolation = "policy-violation"
        case invalidNamespace = "invalid-namespace"
    }

    public var condition: Condition
    public var message: String

    public var description: String { "\(condition.rawValue): \(message)" }
}

/// An incremental parser for the XML of one XMPP stream, written for hostile input.
///
/// Bytes are appended as they arrive and `next()` returns events as they complete; each byte is
/// looked at once, so the cost is linear in the input however it is split into reads. Everything
/// XMPP forbids is refused rather than skipped: DTDs, entity declarations, comments, processing
/// instructions after the XML declaration, and every entity reference but the five predefined
/// ones and character references. No entity is ever expanded, so there is nothing to amplify.
/// Each stanza is bounded in bytes, nesting depth and attributes per element.
public struct XMLStreamParser: Sendable {
    public struct Limits: Sendable {
        /// Bytes of one stanza, from its `<` to its last `>` (also bounds the stream header).
        public var stanzaBytes: Int
        /// Elements nested inside one stanza, the stanza included.
        public var depth = 16
        /// Attributes on one element.
        public var attributes = 32

        public init(stanzaBytes: Int = 128 * 1024) {
            self.stanzaBytes = stanzaBytes
        }
    }

    private enum State {
        /// Text between markup: whitespace around stanzas, character data inside them.
        case content
        /// Just after `<`.
        case markupStart
        /// Inside a start or end tag, up to its `>`; `quote` while in an attribute value.
        case tag(quote: UInt8?)
        /// After `<!`: only `[CDATA[` may follow.
        case bang
        case cdata
        /// After `<?`: only the XML declaration, before the stream header.
        case declaration
    }

    /// An element being built: the stanza root or one of its descendants.
    private struct OpenElement {
        var element: XMPPElement
        var scope: [Substring: String]
        /// Character data since the last child element, appended in place and added as one text
        /// node when the next child starts or the element ends (merging into the last node
        /// would copy it at every CDATA section).
        var text = ""

        mutating func flushText() {
            guard !text.isEmpty else { return }
            element.children.append(.text(text))
            text = ""
        }
    }

    /// May change between stanzas (a smaller budget before login).
    public var limits: Limits
    private var buffer: [UInt8] = []
    private var position = 0
    private var state = State.content
    /// The bytes of the markup or text being read.
    private var token: [UInt8] = []
    /// Bytes of the stanza (or header) being read; whitespace between stanzas is not counted.
    private var stanzaBytes = 0
    private var streamOpen = false
    private var streamName = ""
    private var streamScope: [Substring: String] = [:]
    private var open: [OpenElement] = []
    private var failure: XMLStreamError?

    public init(limits: Limits = Limits()) {
        self.limits = limits
    }

    /// Adds bytes read from the connection.
    public mutating func append<Bytes: Sequence<UInt8>>(_ bytes: Bytes) {
        if position > 0 {
            buffer.removeSubrange(0..<position)
            position = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// Expects a new stream header, as after SASL success (RFC 6120 §6.4.6). Bytes already
    /// appended and not yet parsed are kept.
    public mutating func restart() {
        state = .content
        token.removeAll(keepingCapacity: true)
        stanzaBytes = 0
        streamOpen = false
        open.removeAll()
    }

    /// The next complete event, or `nil` when more bytes are needed.
    /// - Throws: `XMLStreamError`; once thrown, every later call throws it again.
    public mutating func next() throws(XMLStreamError) -> XMLStreamEvent? {
        if let failure { throw failure }
        do {
            while position < buffer.count {
                let byte = buffer[position]
                position += 1
                if let event = try consume(byte) { return event }
            }
            return nil
        } catch {
            failure = error
            throw error
        }
    }

    // MARK: - Bytes

    private var insideStanza: Bool { !open.isEmpty }

    private mutating func consume(_ byte: UInt8) throws(XMLStreamError) -> XMLStreamEvent? {
        if case .content = state, !insideStanza, byte != UInt8(ascii: "<") {
            // Between stanzas: whitespace keepalives are fine and cost nothing to keep.
            guard Self.isWhitespace(byte) else {
                throw XMLStreamError(condition: .notWellFormed, message: "text outside a stanza")
            }
            return nil
        }
        stanzaBytes += 1
        guard stanzaBytes <= limits.stanzaBytes else {
            throw XMLStreamError(
                condition: .policyViolation, message: "a stanza is limited to \(limits.stanzaBytes) bytes")
        }
        switch state {
        case .content:
            if byte == UInt8(ascii: "<") {
                try flushText()
                state = .markupStart
            } else {
                token.append(byte)
            }
        case .markupStart:
            switch byte {
            case UInt8(ascii: "!"):
                state = .bang
            case UInt8(ascii: "?"):
                guard !streamOpen, !insideStanza else {
                    throw XMLStreamError(condition: .restrictedXML, message: "processing instructions are not allowed")
                }
                state = .declaration
            default:
                guard byte != UInt8(ascii: ">"), !Self.isWhitespace(byte) else {
                    throw XMLStreamError(condition: .notWellFormed, message: "a tag without a name")
                }
                token.append(byte)
                state = .tag(quote: nil)
            }
        case .tag(let quote):
            if let quote {
                if byte == quote { state = .tag(quote: nil) }
                if byte == UInt8(ascii: "<") {
                    throw XMLStreamError(condition: .notWellFormed, message: "'<' in an attribute value")
                }
                token.append(byte)
            } else if byte == UInt8(ascii: "\"") || byte == UInt8(ascii: "'") {
                state = .tag(quote: byte)
                token.append(byte)
            } else if byte == UInt8(ascii: ">") {
                state = .content
                let event = try completeTag()
                token.removeAll(keepingCapacity: true)
                return event
            } else if byte == UInt8(ascii: "<") {
                throw XMLStreamError(condition: .notWellFormed, message: "'<' inside a tag")
            } else {
                token.append(byte)
            }
        case .bang:
            token.append(byte)
            let opening = Self.cdataOpening
            if token.count == 1 && byte == UInt8(ascii: "-") {
                throw XMLStreamError(condition: .restrictedXML, message: "comments are not allowed")
            }
            guard token.elementsEqual(opening.prefix(token.count)) else {
                throw XMLStreamError(
                    condition: .restrictedXML, message: "DTDs and entity declarations are not allowed")
            }
            if token.count == opening.count {
                guard insideStanza else {
                    throw XMLStreamError(condition: .notWellFormed, message: "CDATA outside a stanza")
                }
                token.removeAll(keepingCapacity: true)
                state = .cdata
            }
        case .cdata:
            token.append(byte)
            if byte == UInt8(ascii: ">"), token.count >= 3, token[token.count - 2] == UInt8(ascii: "]"),
                token[token.count - 3] == UInt8(ascii: "]")
            {
                token.removeLast(3)
                try appendText(Self.utf8(token[...]))
                token.removeAll(keepingCapacity: true)
                state = .content
            }
        case .declaration:
            token.append(byte)
            if byte == UInt8(ascii: ">"), token.count >= 2, token[token.count - 2] == UInt8(ascii: "?") {
                guard token.starts(with: Array("xml".utf8)), token.count > 3, Self.isWhitespace(token[3]) else {
                    throw XMLStreamError(condition: .restrictedXML, message: "processing instructions are not allowed")
                }
                token.removeAll(keepingCapacity: true)
                state = .content
            }
        }
        return nil
    }

    /// Character data read so far, added to the element being built.
    private mutating func flushText() throws(XMLStreamError) {
        guard !token.isEmpty else { return }
        defer { token.removeAll(keepingCapacity: true) }
        try appendText(try Self.decode(token[...]))
    }

    private mutating func appendText(_ text: String) throws(XMLStreamError) {
        guard !text.isEmpty, let last = open.indices.last else { return }
        open[last].text += text
    }

    // MARK: - Tags

    private mutating func completeTag() throws(XMLStreamError) -> XMLStreamEvent? {
        var bytes = token[...]
        if bytes.first == UInt8(ascii: "/") {
            bytes = bytes.dropFirst()
            while let last = bytes.last, Self.isWhitespace(last) { bytes = bytes.dropLast() }
            return try closeElement(named: Self.utf8(bytes))
        }
        let selfClosing = bytes.last == UInt8(ascii: "/")
        if selfClosing { bytes = bytes.dropLast() }
        let (name, attributes) = try parseStartTag(bytes)
        let parentScope = open.last?.scope ?? (streamOpen ? streamScope : [:])
        var scope = parentScope
        for attribute in attributes {
            if attribute.name == "xmlns" {
                scope[""] = attribute.value
            } else if attribute.name.hasPrefix("xmlns:") {
                guard attribute.name.count > 6, !attribute.value.isEmpty else {
                    throw XMLStreamError(condition: .notWellFormed, message: "malformed namespace declaration")
                }
                scope[attribute.name.dropFirst(6)] = attribute.value
            }
        }
        let prefix = name.firstIndex(of: ":").map { name[..<$0] } ?? ""
        let namespace = scope[prefix]
        if !prefix.isEmpty && namespace == nil {
            throw XMLStreamError(condition: .notWellFormed, message: "undeclared namespace prefix '\(prefix)'")
        }
        let element = XMPPElement(name: name, namespace: namespace, attributes: attributes)

        guard streamOpen else {
            guard element.localName == "stream", namespace == Self.streamsNamespace else {
                throw XMLStreamError(
                    condition: .invalidNamespace, message: "a stream starts with <stream:stream> in \(Self.streamsNamespace)")
            }
            guard !selfClosing else {
                throw XMLStreamError(condition: .notWellFormed, message: "the stream header must not be self-closing")
            }
            streamOpen = true
            streamName = name
            streamScope = scope
            stanzaBytes = 0
            return .streamOpened(element)
        }
        guard open.count < limits.depth else {
            throw XMLStreamError(
                condition: .policyViolation, message: "elements nest at most \(limits.depth) deep in a stanza")
        }
        // Each element costs memory beyond its bytes: charge it against the stanza's budget.
        stanzaBytes += Self.elementCharge
        guard stanzaBytes <= limits.stanzaBytes else {
            throw XMLStreamError(
                condition: .policyViolation, message: "a stanza is limited to \(limits.stanzaBytes) bytes")
        }
        if let parent = open.indices.last { open[parent].flushText() }
        open.append(OpenElement(element: element, scope: scope))
        return selfClosing ? finishElement() : nil
    }

    private mutating func closeElement(named name: String) throws(XMLStreamError) -> XMLStreamEvent? {
        guard let last = open.last else {
            guard streamOpen, name == streamName else {
                throw XMLStreamError(condition: .notWellFormed, message: "unexpected </\(name)>")
            }
            streamOpen = false
            stanzaBytes = 0
            return .streamClosed
        }
        guard last.element.name == name else {
            throw XMLStreamError(
                condition: .notWellFormed, message: "</\(name)> closes <\(last.element.name)>")
        }
        return finishElement()
    }

    /// Pops the innermost element into its parent, or hands on the stanza it completes.
    private mutating func finishElement() -> XMLStreamEvent? {
        var closing = open.removeLast()
        closing.flushText()
        let finished = closing.element
        guard let parent = open.indices.last else {
            stanzaBytes = 0
            return .stanza(finished)
        }
        open[parent].element.children.append(.element(finished))
        return nil
    }

    /// `name attr="value" attr2='value'` into the name and attributes, values decoded.
    private func parseStartTag(_ bytes: ArraySlice<UInt8>) throws(XMLStreamError) -> (
        String, [XMPPElement.Attribute]
    ) {
        var index = bytes.startIndex
        func skipWhitespace() {
            while index < bytes.endIndex, Self.isWhitespace(bytes[index]) { index += 1 }
        }
        func readName() throws(XMLStreamError) -> String {
            let start = index
            while index < bytes.endIndex, !Self.isWhitespace(bytes[index]), bytes[index] != UInt8(ascii: "=") {
                let byte = bytes[index]
                guard byte != UInt8(ascii: "\""), byte != UInt8(ascii: "'"), byte != UInt8(ascii: "&"),
                    byte != UInt8(ascii: "/")
                else { throw XMLStreamError(condition: .notWellFormed, message: "malformed name in a tag") }
                index += 1
            }
            guard index > start else { throw XMLStreamError(condition: .notWellFormed, message: "a tag without a name") }
            return try Self.utf8(bytes[start..<index])
        }

        let name = try readName()
        var attributes: [XMPPElement.Attribute] = []
        while true {
            let before = index
            skipWhitespace()
            guard index < bytes.endIndex else { break }
            guard index > before else {
                throw XMLStreamError(condition: .notWellFormed, message: "attributes must be separated by whitespace")
            }
            let attributeName = try readName()
            skipWhitespace()
            guard index < bytes.endIndex, bytes[index] == UInt8(ascii: "=") else {
                throw XMLStreamError(condition: .notWellFormed, message: "attribute \(attributeName) has no value")
            }
            index += 1
            skipWhitespace()
            guard index < bytes.endIndex, bytes[index] == UInt8(ascii: "\"") || bytes[index] == UInt8(ascii: "'")
            else {
                throw XMLStreamError(condition: .notWellFormed, message: "attribute values must be quoted")
            }
            let quote = bytes[index]
            index += 1
            let start = index
            while index < bytes.endIndex, bytes[index] != quote { index += 1 }
            guard index < bytes.endIndex else {
                throw XMLStreamError(condition: .notWellFormed, message: "unterminated attribute value")
            }
            let value = try Self.decode(bytes[start..<index])
            index += 1
            guard !attributes.contains(where: { $0.name == attributeName }) else {
                throw XMLStreamError(condition: .notWellFormed, message: "attribute \(attributeName) appears twice")
            }
            guard attributes.count < limits.attributes else {
                throw XMLStreamError(
                    condition: .policyViolation, message: "an element has at most \(limits.attributes) attributes")
            }
            attributes.append(.init(name: attributeName, value: value))
        }
        return (name, attributes)
    }

    // MARK: - Characters

    public static let streamsNamespace = "http://etherx.jabber.org/streams"
    /// What one element counts against `stanzaBytes` beyond its bytes: its share of the tree.
    static let elementCharge = 64
    private static let cdataOpening = Array("[CDATA[".utf8)

    private static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D
    }

    private static func utf8(_ bytes: ArraySlice<UInt8>) throws(XMLStreamError) -> String {
        for byte in bytes where byte < 0x20 && !isWhitespace(byte) {
            throw XMLStreamError(condition: .notWellFormed, message: "control character U+\(String(byte, radix: 16)) in XML")
        }
        guard let text = String(validating: bytes, as: UTF8.self) else {
            throw XMLStreamError(condition: .notWellFormed, message: "the stream is not valid UTF-8")
        }
        return text
    }

    /// Text or an attribute value with `&lt;`, `&gt;`, `&amp;`, `&quot;`, `&apos;` and character
    /// references resolved. Any other entity reference is refused: XMPP has no DTD to define one.
    private static func decode(_ bytes: ArraySlice<UInt8>) throws(XMLStreamError) -> String {
        guard bytes.contains(UInt8(ascii: "&")) else { return try utf8(bytes) }
        var out: [UInt8] = []
        out.reserveCapacity(bytes.count)
        var index = bytes.startIndex
        while index < bytes.endIndex {
            let byte = bytes[index]
            guard byte == UInt8(ascii: "&") else {
                out.append(byte)
                index += 1
                continue
            }
            // The longest reference is `&#x10FFFF;` (10 bytes).
            guard let end = bytes[index..<min(bytes.endIndex, index + 11)].firstIndex(of: UInt8(ascii: ";")) else {
                throw XMLStreamError(condition: .notWellFormed, message: "'&' that starts no reference")
            }
            let name = bytes[(index + 1)..<end]
            switch Array(name) {
            case Array("lt".utf8): out.append(UInt8(ascii: "<"))
            case Array("gt".utf8): out.append(UInt8(ascii: ">"))
            case Array("amp".utf8): out.append(UInt8(ascii: "&"))
            case Array("quot".utf8): out.append(UInt8(ascii: "\""))
            case Array("apos".utf8): out.append(UInt8(ascii: "'"))
            default:
                guard name.first == UInt8(ascii: "#") else {
                    throw XMLStreamError(
                        condition: .restrictedXML, message: "entity references are not allowed, only &lt; &gt; &amp; &quot; &apos;")
                }
                let hexadecimal = name.dropFirst().first == UInt8(ascii: "x")
                let digits = name.dropFirst(hexadecimal ? 2 : 1)
                let isDigit: (UInt8) -> Bool = { byte in
                    (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte)
                        || (hexadecimal
                            && ((UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
                                || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(byte)))
                }
                let scalarValue: UInt32? =
                    !digits.isEmpty && digits.allSatisfy(isDigit)
                    ? UInt32(String(decoding: digits, as: UTF8.self), radix: hexadecimal ? 16 : 10) : nil
                guard let scalarValue, let scalar = Unicode.Scalar(scalarValue),
                    scalarValue >= 0x20 || scalarValue == 0x09 || scalarValue == 0x0A || scalarValue == 0x0D
                else {
                    throw XMLStreamError(condition: .notWellFormed, message: "invalid character reference")
                }
                out.append(contentsOf: Array(String(Character(scalar)).utf8))
            }
            index = end + 1
        }
        return try utf8(out[...])
    }
}
