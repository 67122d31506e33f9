import Crypto

/// Server keys: the secrets app servers send as `Authorization: key=…` or `Bearer …`.
/// Only their SHA-256 hashes are stored.
public enum ServerKey {
    /// A new random key: 32 random bytes, URL-safe base64.
    public static func generate() -> String {
        Base64URL.encode(SymmetricKey(size: .bits256).withUnsafeBytes { Array($0) })
    }

    /// What the database keeps of `key`.
    public static func hash(_ key: String) -> [UInt8] {
        Array(SHA256.hash(data: Array(key.utf8)))
    }
}
