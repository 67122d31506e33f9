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

    /// The secret, for `export`: the keyring that lets another database open these keys.
    public var secretBytes: [UInt8] { secret }

    /// A fresh random secret for a new database.
    public static func makeSecret() -> [UInt8] {
        SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) }
    }

    /// A new key string for `groupID` in `project`; a different string on every call.
    public func issue(groupID: Int64, in project: Project) -> String {
        // The padding is zeros: the random nonce already makes every key a fresh string.
        var plaintext: [UInt8] = [Self.version]
        plaintext += groupID.bigEndianBytes
        plaintext += repeatElement(0, count: Self.paddingBytes)
        // AES-GCM with a random 96-bit nonce cannot fail for inputs of this size.
        let box = try! AES.GCM.seal(plaintext, using: key, authenticating: project.rowID.bigEndianBytes)
        return Self.prefix + Base64URL.encode(box.combined!)
    }

    /// The group id sealed in `notificationKey`.
    /// - Throws: `RegistryError.undecryptableKey` for anything this project did not issue.
    public func groupID(from notificationKey: String, in project: Project) throws(RegistryError) -> Int64 {
        try groupID(from: notificationKey, sealedFor: project.rowID)
    }

    /// The group id sealed in `notificationKey` for the project with row id `projectRowID` (of
    /// this database, or of the one a keyring was imported from).
    /// - Throws: `RegistryError.undecryptableKey` for anything this secret did not seal for it.
    public func groupID(from notificationKey: String, sealedFor projectRowID: Int64) throws(RegistryError) -> Int64 {
        guard notificationKey.hasPrefix(Self.prefix), notificationKey.utf8.count < 512,
            let sealed = Base64URL.decode(notificationKey.dropFirst(Self.prefix.count)),
            let box = try? AES.GCM.SealedBox(combined: sealed),
            let plaintext = try? AES.GCM.open(box, using: key, authenticating: projectRowID.bigEndianBytes),
            plaintext.count == 1 + 8 + Self.paddingBytes, plaintext.first == Self.version,
            plaintext.dropFirst(9).allSatisfy({ $0 == 0 })
        else {
            throw .undecryptableKey
        }
        return plaintext.dropFirst().prefix(8).reduce(Int64(0)) { $0 << 8 | Int64($1) }
    }
}

/// A secret that sealed notification keys for one project, as `import` brings it from another
/// database: keys that database issued keep naming the groups imported from it.
public struct NotificationKeyring: Sendable, Hashable {
    /// The store's id for it; 0 before it is stored.
    public var id: Int64
    public var secret: [UInt8]
    /// The row id, in the database that issued the keys, of the project they were sealed for.
    public var sealedFor: Int64

    public init(id: Int64 = 0, secret: [UInt8], sealedFor: Int64) {
        self.id = id
        self.secret = secret
        self.sealedFor = sealedFor
    }

    /// Names the keyring in export files without showing its secret: 16 bytes of a SHA-256 of
    /// the secret and the project row id, hex.
    public var fingerprint: String {
        var hash = SHA256()
        hash.update(data: Array("fcm-registry keyring".utf8))
        hash.update(data: secret)
        hash.update(data: sealedFor.bigEndianBytes)
        return hash.finalize().prefix(16).map { String(format: "%02x", $0) }.joined()
    }

    /// The group id a key sealed by this keyring names, or `nil` when it did not seal the key.
    public func groupID(from notificationKey: String) -> Int64? {
        try? NotificationKeyCodec(secret: secret).groupID(from: notificationKey, sealedFor: sealedFor)
    }
}

extension Int64 {
    var bigEndianBytes: [UInt8] {
        withUnsafeBytes(of: bigEndian) { Array($0) }
    }
}

/// URL-safe base64 without padding, as FCM keys and our page tokens use.
public enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    private static let values: [UInt8] = {
        var table = [UInt8](repeating: 0xFF, count: 256)
        for (value, character) in alphabet.enumerated() { table[Int(character)] = UInt8(value) }
        return table
    }()

    public static func encode(_ data: some Collection<UInt8>) -> String {
        let bytes = Array(data)
        var output = [UInt8]()
        output.reserveCapacity((bytes.count * 4 + 2) / 3)
        var index = 0
        while index + 3 <= bytes.count {
            let chunk = UInt32(bytes[index]) << 16 | UInt32(bytes[index + 1]) << 8 | UInt32(bytes[index + 2])
            for shift in [18, 12, 6, 0] { output.append(alphabet[Int(chunk >> UInt32(shift) & 63)]) }
            index += 3
        }
        let rest = bytes.count - index
        if rest > 0 {
            let chunk = UInt32(bytes[index]) << 16 | (rest == 2 ? UInt32(bytes[index + 1]) << 8 : 0)
            for shift in [18, 12, 6].prefix(rest + 1) { output.append(alphabet[Int(chunk >> UInt32(shift) & 63)]) }
        }
        return String(decoding: output, as: UTF8.self)
    }

    /// The bytes of `text`, or `nil` when it is not URL-safe base64 without padding.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        let characters = Array(text.utf8)
        guard characters.count % 4 != 1 else { return nil }
        var output = [UInt8]()
        output.reserveCapacity(characters.count * 3 / 4)
        var buffer: UInt32 = 0
        var bits = 0
        for character in characters {
            let value = values[Int(character)]
            guard value != 0xFF else { return nil }
            buffer = buffer << 6 | UInt32(value)
            bits += 6
            if bits >= 8 {
                bits -= 8
                output.append(UInt8(truncatingIfNeeded: buffer >> UInt32(bits)))
            }
        }
        // Leftover bits must be zero, so that every byte string has exactly one encoding.
        guard buffer & ((1 << UInt32(bits)) - 1) == 0 else { return nil }
        return output
    }
}
