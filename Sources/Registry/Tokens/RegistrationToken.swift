/// The rules for FCM registration tokens (and Firebase installation ids, which obey the same shape).
public enum RegistrationToken {
    public static let maximumLength = 4096

    /// 1–4096 characters of `[A-Za-z0-9_:.-]`, checked after URL decoding.
    public static func isWellFormed(_ token: some StringProtocol) -> Bool {
        let utf8 = token.utf8
        guard !utf8.isEmpty, utf8.count <= maximumLength else { return false }
        return utf8.allSatisfy { byte in
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                UInt8(ascii: "0")...UInt8(ascii: "9"),
                UInt8(ascii: "_"), UInt8(ascii: ":"), UInt8(ascii: "."), UInt8(ascii: "-"):
                true
            default:
                false
            }
        }
    }
}

/// Whether a token may receive messages. A token the app server reports dead is `unregistered`
/// until it is registered again; FCM-compatible calls answer `NOT_FOUND` for it.
public enum TokenState: String, Sendable, Hashable, Codable {
    case registered
    case unregistered
}
