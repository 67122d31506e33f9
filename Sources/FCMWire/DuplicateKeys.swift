/// Finds a key that appears twice in one JSON object, in one pass over the bytes.
///
/// JSON parsers differ on `{"dry_run":true,"dry_run":false}`: most keep the last, some the first.
/// A request read one way by a proxy and another by this server is a request that does what
/// nobody asked, so such bodies are refused instead (as Google's own JSON parser does).
///
/// The scan runs before every decode, so it is a tight loop over the raw bytes: value strings
/// are skipped without copying, and only keys are kept (escapes resolved only when they have any).
enum DuplicateKeys {
    /// The first repeated key, or `nil`. Malformed JSON is left for the decoder to report.
    static func first(in bytes: UnsafeRawBufferPointer) -> String? {
        var frames: [(isObject: Bool, keys: Set<[UInt8]>, expectingKey: Bool)] = []
        let count = bytes.count
        var index = 0
        while index < count {
            switch bytes[index] {
            case UInt8(ascii: "{"):
                frames.append((true, [], true))
            case UInt8(ascii: "["):
                frames.append((false, [], false))
            case UInt8(ascii: "}"), UInt8(ascii: "]"):
                if !frames.isEmpty { frames.removeLast() }
            case UInt8(ascii: ","):
                if let last = frames.indices.last, frames[last].isObject { frames[last].expectingKey = true }
            case UInt8(ascii: "\""):
                let start = index + 1
                var end = start
                var escaped = false
                while end < count, bytes[end] != UInt8(ascii: "\"") {
                    if bytes[end] == UInt8(ascii: "\\") {
                        escaped = true
                        end += 2
                    } else {
                        end += 1
                    }
                }
                guard end < count else { return nil }
                if let last = frames.indices.last, frames[last].isObject, frames[last].expectingKey {
                    frames[last].expectingKey = false
                    let raw = UnsafeRawBufferPointer(rebasing: bytes[start..<end])
                    guard let key = escaped ? unescape(raw) : Array(raw) else { return nil }
                    if !frames[last].keys.insert(key).inserted { return String(decoding: key, as: UTF8.self) }
                }
                index = end
            default:
                break
            }
            index += 1
        }
        return nil
    }

    /// A key's bytes with its escapes resolved, so `"a"` and `"\u0061"` are one key.
    private static func unescape(_ raw: UnsafeRawBufferPointer) -> [UInt8]? {
        var content: [UInt8] = []
        var index = 0
        while index < raw.count {
            let byte = raw[index]
            index += 1
            guard byte == UInt8(ascii: "\\") else {
                content.append(byte)
                continue
            }
            guard index < raw.count else { return nil }
            let escaped = raw[index]
            index += 1
            switch escaped {
            case UInt8(ascii: "u"):
                guard index + 4 <= raw.count else { return nil }
                var value: UInt32 = 0
                for offset in 0..<4 {
                    guard let nibble = hexValue(raw[index + offset]) else { return nil }
                    value = value << 4 | nibble
                }
                index += 4
                // A surrogate half stands for itself: equal escapes still compare equal.
                let scalar = Unicode.Scalar(value) ?? "\u{FFFD}"
                content.append(contentsOf: Array(String(Character(scalar)).utf8))
            case UInt8(ascii: "n"): content.append(0x0A)
            case UInt8(ascii: "t"): content.append(0x09)
            case UInt8(ascii: "r"): content.append(0x0D)
            case UInt8(ascii: "b"): content.append(0x08)
            case UInt8(ascii: "f"): content.append(0x0C)
            default: content.append(escaped)
            }
        }
        return content
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
