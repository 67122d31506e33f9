import Crypto
import Foundation

/// Signatures as the Standard Webhooks specification defines them: HMAC-SHA256 over
/// `{webhook-id}.{webhook-timestamp}.{body}` with the secret's bytes (the base64 after `whsec_`),
/// sent as `v1,<base64>`; several, space-separated, while a rotated secret still signs.
public enum WebhookSignature {
    /// The `webhook-signature` header: one `v1,…` per secret, the current one first.
    public static func header(id: String, timestamp: Int64, body: String, secrets: [String]) -> String {
        secrets.compactMap { sign(id: id, timestamp: timestamp, body: body, secret: $0) }.joined(separator: " ")
    }

    /// One signature, `v1,<base64>`; `nil` for a secret that is not `whsec_` and base64.
    public static func sign(id: String, timestamp: Int64, body: String, secret: String) -> String? {
        guard let key = key(of: secret) else { return nil }
        let content = Data("\(id).\(timestamp).\(body)".utf8)
        let mac = HMAC<SHA256>.authenticationCode(for: content, using: key)
        return "v1," + Data(mac).base64EncodedString()
    }

    static func key(of secret: String) -> SymmetricKey? {
        let encoded = secret.hasPrefix("whsec_") ? String(secret.dropFirst(6)) : secret
        guard let bytes = Data(base64Encoded: encoded), !bytes.isEmpty else { return nil }
        return SymmetricKey(data: bytes)
    }
}
