/// Finds a key that appears twice in one JSON object, in one pass over the bytes.
///
/// JSON parsers differ on `{"dry_run":true,"dry_run":false}`: most keep the last, some the first.
/// A request read one way by a proxy and another by this server is a request that does what
/// nobody asked, so such bodies are refused instead (as Google's own JSON parser does).
enum DuplicateKeys {
    /// The first repeated key, or `nil`. Malformed JSON is left for the decoder to report.
    static func first(in bytes: some Collection<UInt8>) -> String? {
        var frames: [(isObject: Bool, keys: Set<[UInt8]>, expectingKey: Bool)] = []
        var iterator = bytes.makeIterator()
        while let byte = iterator.next() {
            switch byte {
            case UInt8(ascii: "{"):
                frames.append((true, [], true))
            case UInt8(ascii: "["):
                frames.append((false, [], false))
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                if !frames.isEmpty { frames.removeLast() }
            case UInt8(ascii: ","):
                if let last = frames.indices.last, frames[last].isObject { frames[last].expectingKey = true }
            case UInt8(ascii: "\""):
                guard let string = readString(&iterator) else { return nil }
                if let last = frames.indices.last, frames[last].isObject, frames[last].expectingKey {
                    frames[last].expectingKey = false
                    if !frames[last].keys.insert(string).inserted { return String(decoding: string, as: UTF8.self) }
                }
            default:
                break
            }
        }
        return nil
    }

    /// The string's content after its opening quote, escapes resolved (so `"a"` and `"\u0061"` are one key).
    private static func readString<I: IteratorProtocol<UInt8>>(_ iterator: inout I) -> [UInt8]? {
        var content: [UInt8] = []
        while let byte = iterator.next() {
            switch byte {
            case UInt8(ascii: "\""):
                return content
            case UInt8(ascii: "\\"):
                guard let escaped = iterator.next() else { return nil }
                switch escaped {
                case UInt8(ascii: "u"):
                    var value: UInt32 = 0
                    for _ in 0..<4 {
                        guard let digit = iterator.next(), let nibble = hexValue(digit) else { return nil }
                        value = value << 4 | nibble
                    }
                    // Surrogate halves stay as their code units: equal escapes still compare equal.
                    let scalar = Unicode.Scalar(value) ?? Unicode.Scalar(0xFFFD)!
                    content.append(contentsOf: Array(String(Character(scalar)).utf8))
                case UInt8(ascii: "n"): content.append(0x0A)
                case UInt8(ascii: "t"): content.append(0x09)
                case UInt8(ascii: "r"): content.append(0x0D)
                case UInt8(ascii: "b"): content.append(0x08)
                case UInt8(ascii: "f"): content.append(0x0C)
                default: content.append(escaped)
                }
            default:
                content.append(byte)
            }
        }
        return nil
    }

    private static func hexValue(_ byte: UInt8) -> UInt32? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt32(byte - UInt8(ascii: "0"))
        case UInt8(ascii: "a")...UInt8(ascii: "f"): UInt32(byte - UInt8(ascii: "a") + 10)
        case UInt8(ascii: "A")...UInt8(ascii: "F"): UInt32(byte - UInt8(ascii: "A") + 10)
        default: nil
        }
    }
}
