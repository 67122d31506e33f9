import Crypto
import Foundation
import SwiftASN1
import X509

/// A local certificate authority and a server certificate for Google's host names, so that an
/// unmodified SDK reaches fcm-registry with only a hosts entry and a trusted CA, the way people
/// point clients at any local stand-in for a Google API.
public enum LocalCertificates {
    /// The names the server certificate carries by default: every Google host an SDK or an XMPP
    /// client calls (XMPP clients check their login domain, `SENDER@gcm.googleapis.com`), and
    /// the loopback names.
    public static let defaultNames = [
        "fcm.googleapis.com", "iid.googleapis.com", "oauth2.googleapis.com", "iamcredentials.googleapis.com",
        "fcm-xmpp.googleapis.com", "gcm.googleapis.com", "gcm-xmpp.googleapis.com", "gcm-preprod.googleapis.com",
        "localhost", "127.0.0.1",
    ]

    /// The files `tls init` writes.
    public struct Files: Sendable {
        public var caCertificate: String
        public var caKey: String
        public var serverCertificate: String
        public var serverKey: String
    }

    /// Writes `ca.pem`, `ca-key.pem`, `server.pem` (the server certificate, then the CA's) and
    /// `server-key.pem` into `directory`; the keys readable by their owner only. An IP address
    /// among `names` becomes an IP SAN.
    public static func create(in directory: String, names: [String] = defaultNames, now: Date = Date()) throws -> Files {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let caKey = P256.Signing.PrivateKey()
        let caName = try DistinguishedName {
            OrganizationName("fcm-registry")
            CommonName("fcm-registry local CA")
        }
        let caPublicKey = Certificate.PublicKey(caKey.publicKey)
        let caIdentifier = SubjectKeyIdentifier(hash: caPublicKey)
        let ca = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: caPublicKey,
            notValidBefore: now.addingTimeInterval(-3600), notValidAfter: now.addingTimeInterval(10 * 365 * 86400),
            issuer: caName, subject: caName, signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.isCertificateAuthority(maxPathLength: 0))
                Critical(KeyUsage(keyCertSign: true, cRLSign: true))
                caIdentifier
            },
            issuerPrivateKey: .init(caKey))

        let serverKey = P256.Signing.PrivateKey()
        let serverPublicKey = Certificate.PublicKey(serverKey.publicKey)
        let alternativeNames = names.map { name -> GeneralName in
            if let address = ipv4Bytes(name) { return .ipAddress(ASN1OctetString(contentBytes: address[...])) }
            return .dnsName(name)
        }
        let server = try Certificate(
            version: .v3, serialNumber: .init(), publicKey: serverPublicKey,
            // Clients refuse server certificates valid for more than 825 days (Apple) or 398 (browsers).
            notValidBefore: now.addingTimeInterval(-3600), notValidAfter: now.addingTimeInterval(397 * 86400),
            issuer: caName, subject: try DistinguishedName { CommonName(names.first ?? "localhost") },
            signatureAlgorithm: .ecdsaWithSHA256,
            extensions: try Certificate.Extensions {
                Critical(BasicConstraints.notCertificateAuthority)
                Critical(KeyUsage(digitalSignature: true, keyEncipherment: true))
                try ExtendedKeyUsage([.serverAuth])
                SubjectAlternativeNames(alternativeNames)
                SubjectKeyIdentifier(hash: serverPublicKey)
                AuthorityKeyIdentifier(keyIdentifier: caIdentifier.keyIdentifier)
            },
            issuerPrivateKey: .init(caKey))

        let files = Files(
            caCertificate: directory + "/ca.pem", caKey: directory + "/ca-key.pem",
            serverCertificate: directory + "/server.pem", serverKey: directory + "/server-key.pem")
        try write(try ca.serializeAsPEM().pemString + "\n", to: files.caCertificate, mode: 0o644)
        try write(caKey.pemRepresentation + "\n", to: files.caKey, mode: 0o600)
        try write(
            try server.serializeAsPEM().pemString + "\n" + ca.serializeAsPEM().pemString + "\n",
            to: files.serverCertificate, mode: 0o644)
        try write(serverKey.pemRepresentation + "\n", to: files.serverKey, mode: 0o600)
        return files
    }

    private static func write(_ text: String, to path: String, mode: Int) throws {
        try? FileManager.default.removeItem(atPath: path)
        guard
            FileManager.default.createFile(
                atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: mode])
        else { throw CocoaError(.fileWriteUnknown) }
    }

    /// The four bytes of a dotted IPv4 address, or `nil` for a host name.
    static func ipv4Bytes(_ text: String) -> [UInt8]? {
        let parts = text.split(separator: ".", omittingEmptySubsequences: false)
        guard parts.count == 4 else { return nil }
        let bytes = parts.compactMap { UInt8($0) }
        return bytes.count == 4 ? bytes : nil
    }
}
