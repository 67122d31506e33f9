import Crypto
import Foundation

/// Issues and reads `notification_key` strings without storing a row per key.
///
/// A key is `APA91b` followed by the URL-safe base64 of an AES-GCM box that seals the group id
/// with a random nonce, authenticated with the project's row id. So every key ever issued for a
/// group keeps resolving while the group lives (FCM hands out a fresh string on every GET), keys
/// cannot be forged without the database's secret, a key never opens in another project, and,
/// since group ids are never reused, a key of a deleted group never reaches a later group of the
/// same name. The sealed text is padded so that keys are as long as FCM's (120 characters).
public struct NotificationKeyCodec: Sendable {
    public static let prefix = "APA91b"
    private static let version: UInt8 = 1
    private static let paddingBytes = 48

    private let secret: [UInt8]
    private var key: SymmetricKey { SymmetricKey(data: secret) }

    /// - Parameter secret: 32 bytes kept in the database.
    public init(secret: [UInt8]) {
        self.secret = secret
    }

    /// A fresh random secret for a new database.
    public static func makeSecret() -> [UInt8] {
        SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }
    }

    /// A new key string for `groupID` in `project`; a different string on every call.
    public func issue(groupID: Int64, in project: Project) -> String {
        var plaintext: [UInt8] = [Self.version]
        plaintext += groupID.bigEndianBytes
        plaintext += (0..<Self.paddingBytes).map { _ in UInt8.random(in: .min ... .max) }
        // AES-GCM with a random 96-bit nonce cannot fail for inputs of this size.
        let box = try! AES.GCM.seal(plaintext, using: key, authenticating: project.rowID.bigEndianBytes)
        return Self.prefix + Base64URL.encode(box.combined!)
    }

    /// The group id sealed in `notificationKey`.
    /// - Throws: `RegistryError.undecryptableKey` for anything this project did not issue.
    public func groupID(from notificationKey: String, in project: Project) throws(RegistryError) -> Int64 {
        guard notificationKey.hasPrefix(Self.prefix), notificationKey.utf8.count < 512,
            let sealed = Base64URL.decode(notificationKey.dropFirst(Self.prefix.count)),
            let box = try? AES.GCM.SealedBox(combined: sealed),
            let plaintext = try? AES.GCM.open(box, using: key, authenticating: project.rowID.bigEndianBytes),
            plaintext.count == 1 + 8 + Self.paddingBytes, plaintext.first == Self.version
        else {
            throw .undecryptableKey
        }
        return plaintext.dropFirst().prefix(8).reduce(Int64(0)) { $0 << 8 | Int64($1) }
    }
}

extension Int64 {
    var bigEndianBytes: [UInt8] {
        withUnsafeBytes(of: bigEndian) { Array($0) }
    }
}

/// URL-safe base64 without padding, as FCM keys and our page tokens use.
public enum Base64URL {
    public static func encode(_ data: some DataProtocol) -> String {
        Data(data).base64EncodedString()
            .replacingOccurrences(of: "+", with: "-")
            .replacingOccurrences(of: "/", with: "_")
            .replacingOccurrences(of: "=", with: "")
    }

    public static func decode(_ text: some StringProtocol) -> Data? {
        guard text.utf8.allSatisfy({ $0 != UInt8(ascii: "+") && $0 != UInt8(ascii: "/") && $0 != UInt8(ascii: "=") })
        else { return nil }
        var base64 = text.replacingOccurrences(of: "-", with: "+").replacingOccurrences(of: "_", with: "/")
        base64 += String(repeating: "=", count: (4 - base64.count % 4) % 4)
        return Data(base64Encoded: base64)
    }
}
