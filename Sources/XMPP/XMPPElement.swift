/// One XML element of an XMPP stream: a stanza, a child of one, or the stream header.
///
/// Names are kept as written (`data:gcm`) with the namespace the parser resolved for them, so
/// code matches on `(localName, namespace)` whatever prefix a client chose.
public struct XMPPElement: Sendable, Equatable {
    public struct Attribute: Sendable, Equatable {
        /// As written, prefix included (`xmlns:stream`).
        public var name: String
        /// With its entities and character references resolved.
        public var value: String
    }

    public enum Node: Sendable, Equatable {
        case element(XMPPElement)
        /// Character data with entities resolved; CDATA sections arrive as text too.
        case text(String)
    }

    /// As written: `message`, `stream:stream`, `data:gcm`.
    public var name: String
    /// The namespace URI of the element's prefix (or of the default namespace in scope).
    public var namespace: String?
    public var attributes: [Attribute]
    public var children: [Node]

    public init(name: String, namespace: String? = nil, attributes: [Attribute] = [], children: [Node] = []) {
        self.name = name
        self.namespace = namespace
        self.attributes = attributes
        self.children = children
    }

    /// The name without its prefix: `gcm` for `data:gcm`.
    public var localName: Substring {
        guard let colon = name.firstIndex(of: ":") else { return name[...] }
        return name[name.index(after: colon)...]
    }

    /// The value of the attribute written `name`, if present.
    public func attribute(_ name: String) -> String? {
        attributes.first { $0.name == name }?.value
    }

    /// The first child element with this local name (and namespace, when given).
    public func child(_ localName: String, namespace: String? = nil) -> XMPPElement? {
        for case .element(let element) in children
        where element.localName == localName && (namespace == nil || element.namespace == namespace) {
            return element
        }
        return nil
    }

    /// The element's own character data, concatenated (child elements' text is not included).
    public var text: String {
        var result = ""
        for case .text(let text) in children { result += text }
        return result
    }

    /// The element written back as XML, with text and attribute values escaped. Namespace
    /// declarations are attributes, so they are kept as received.
    public var xml: String {
        var out = "<" + name
        for attribute in attributes {
            out += " \(attribute.name)=\"\(XMLEscaping.attribute(attribute.value))\""
        }
        guard !children.isEmpty else { return out + "/>" }
        out += ">"
        for child in children {
            switch child {
            case .element(let element): out += element.xml
            case .text(let text): out += XMLEscaping.text(text)
            }
        }
        return out + "</\(name)>"
    }
}

/// Escaping for what the server writes.
public enum XMLEscaping {
    /// Character data: only `&`, `<` and `>` are escaped, quotes stay literal, as CCS wrote its
    /// JSON (some clients compare the text before unescaping it).
    public static func text(_ text: String) -> String {
        guard text.utf8.contains(where: { $0 == UInt8(ascii: "&") || $0 == UInt8(ascii: "<") || $0 == UInt8(ascii: ">") })
        else { return text }
        var out = ""
        out.reserveCapacity(text.utf8.count + 16)
        for character in text.unicodeScalars {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            default: out.unicodeScalars.append(character)
            }
        }
        return out
    }

    /// An attribute value inside double quotes.
    public static func attribute(_ value: String) -> String {
        var out = ""
        out.reserveCapacity(value.utf8.count)
        for character in value.unicodeScalars {
            switch character {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            default: out.unicodeScalars.append(character)
            }
        }
        return out
    }
}
