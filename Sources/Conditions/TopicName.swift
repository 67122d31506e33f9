/// FCM's topic-name rules: `[a-zA-Z0-9-_.~%]{1,900}`, case-sensitive.
public enum TopicName {
    /// The longest topic name FCM accepts.
    public static let maximumLength = 900

    /// Whether `byte` may appear in a topic name.
    @inline(__always)
    public static func isAllowed(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
            UInt8(ascii: "0")...UInt8(ascii: "9"),
            UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."), UInt8(ascii: "~"), UInt8(ascii: "%"):
            true
        default:
            false
        }
    }

    /// Whether `name` is a valid topic name.
    public static func isValid(_ name: some StringProtocol) -> Bool {
        let utf8 = name.utf8
        return !utf8.isEmpty && utf8.count <= maximumLength && utf8.allSatisfy(isAllowed)
    }
}
