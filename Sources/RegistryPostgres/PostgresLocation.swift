import Foundation
import NIOSSL
import PostgresNIO

/// A `postgres://` or `postgresql://` URL, as `--db` and `FCM_REGISTRY_DB` take it, read once and
/// checked at start: where the server is, who connects, how TLS is used and which schema holds the
/// registry. Its `description` never holds the password, so it is what logs and errors print.
///
/// ```
/// postgres://registry:secret@db.internal:5432/registry?sslmode=verify-full&sslrootcert=/etc/ssl/db-ca.pem&search_path=fcm
/// ```
public struct PostgresLocation: Sendable, Hashable, CustomStringConvertible {
    /// How TLS is used, with libpq's names and meanings.
    public enum TLSMode: String, Sendable, Hashable, CaseIterable {
        /// Plain TCP.
        case disable
        /// TLS when the server offers it, without checking its certificate (libpq's default).
        case prefer
        /// TLS or no connection; the certificate is checked against `sslrootcert` when one is given,
        /// not otherwise (as libpq does).
        case require
        /// TLS, a certificate from `sslrootcert` (or the system's trust store) and the host's name in it.
        case verifyFull = "verify-full"
    }

    public var host: String
    public var port: Int
    public var username: String
    /// Kept out of `description`.
    public var password: String?
    public var database: String
    public var tls: TLSMode
    /// A PEM file of the CA certificates the server's chain must end in.
    public var rootCertificatePath: String?
    /// The schema the registry's tables live in (`search_path`); `nil` for the server's default.
    public var schema: String?

    /// Whether `text` is meant as a PostgreSQL URL rather than an SQLite file's path.
    public static func isURL(_ text: String) -> Bool {
        let lowered = text.lowercased()
        return lowered.hasPrefix("postgres://") || lowered.hasPrefix("postgresql://")
    }

    /// Reads a URL.
    /// - Throws: `PostgresLocationError` saying what is wrong, never quoting the password.
    public init(parsing text: String) throws(PostgresLocationError) {
        guard Self.isURL(text), let url = URLComponents(string: text) else {
            throw PostgresLocationError("it is not a postgres:// URL")
        }
        guard let host = url.host, !host.isEmpty else {
            throw PostgresLocationError("the URL names no host (postgres://user:password@host:5432/database)")
        }
        guard let user = url.user, !user.isEmpty else {
            throw PostgresLocationError("the URL names no user (postgres://user:password@host:5432/database)")
        }
        self.host = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        port = url.port ?? 5432
        guard (1...65_535).contains(port) else { throw PostgresLocationError("the port must be 1 to 65535") }
        username = user.removingPercentEncoding ?? user
        password = url.password.map { $0.removingPercentEncoding ?? $0 }
        let path = url.path.hasPrefix("/") ? String(url.path.dropFirst()) : url.path
        database = path.isEmpty ? username : (path.removingPercentEncoding ?? path)
        guard !database.contains("/") else { throw PostgresLocationError("the database name holds a /") }
        tls = .prefer
        for item in url.queryItems ?? [] {
            let value = item.value ?? ""
            switch item.name {
            case "sslmode":
                guard let mode = TLSMode(rawValue: value) else {
                    throw PostgresLocationError(
                        "sslmode must be one of \(TLSMode.allCases.map(\.rawValue).joined(separator: ", ")), not \(value)")
                }
                tls = mode
            case "sslrootcert":
                rootCertificatePath = value
            case "search_path", "schema":
                guard Self.isPlainName(value) else {
                    throw PostgresLocationError("\(item.name) must be one schema name of letters, digits and _")
                }
                schema = value
            case "options":
                // libpq's form: options=-c search_path=NAME (nothing else is taken).
                let words = value.split(separator: " ")
                guard words.count == 2, words[0] == "-c", words[1].hasPrefix("search_path="),
                    case let name = String(words[1].dropFirst("search_path=".count)), Self.isPlainName(name)
                else { throw PostgresLocationError("options may only be -c search_path=NAME") }
                schema = name
            default:
                throw PostgresLocationError(
                    "unknown parameter \(item.name): the URL takes sslmode, sslrootcert, search_path (or schema, or options=-c search_path=NAME)")
            }
        }
        if rootCertificatePath != nil, tls == .disable || tls == .prefer {
            throw PostgresLocationError("sslrootcert needs sslmode=require or verify-full")
        }
    }

    /// An unquoted SQL identifier: what a schema name may be here, so it can be written into SQL.
    static func isPlainName(_ name: String) -> Bool {
        guard let first = name.utf8.first, first == UInt8(ascii: "_") || (first | 0x20) >= 0x61 && (first | 0x20) <= 0x7A
        else { return false }
        return name.utf8.count <= 63
            && name.utf8.allSatisfy { $0 == UInt8(ascii: "_") || ($0 | 0x20) >= 0x61 && ($0 | 0x20) <= 0x7A || (0x30...0x39).contains($0) }
    }

    /// The URL with `***` for the password: what may be logged.
    public var description: String {
        var text = "postgres://\(username)\(password == nil ? "" : ":***")@\(host.contains(":") ? "[\(host)]" : host):\(port)/\(database)"
        var parameters = ["sslmode=\(tls.rawValue)"]
        if let rootCertificatePath { parameters.append("sslrootcert=\(rootCertificatePath)") }
        if let schema { parameters.append("search_path=\(schema)") }
        text += "?" + parameters.joined(separator: "&")
        return text
    }

    /// The client's configuration: TLS as `tls` says, the schema as the session's `search_path`.
    /// - Throws: `PostgresLocationError` when `sslrootcert` cannot be read.
    public func configuration() throws(PostgresLocationError) -> PostgresClient.Configuration {
        let mode: PostgresClient.Configuration.TLS
        switch try tlsConfiguration() {
        case nil: mode = .disable
        case let (configuration, required)?: mode = required ? .require(configuration) : .prefer(configuration)
        }
        var configuration = PostgresClient.Configuration(
            host: host, port: port, username: username, password: password, database: database, tls: mode)
        if let schema { configuration.options.additionalStartupParameters = [("search_path", schema)] }
        return configuration
    }

    /// The same place, credentials and TLS for one connection of its own, outside the pool.
    /// - Throws: `PostgresLocationError` when `sslrootcert` cannot be read or TLS cannot be set up.
    public func connectionConfiguration() throws(PostgresLocationError) -> PostgresConnection.Configuration {
        let mode: PostgresConnection.Configuration.TLS
        do {
            switch try tlsConfiguration() {
            case nil: mode = .disable
            case let (configuration, required)?:
                let context = try NIOSSLContext(configuration: configuration)
                mode = required ? .require(context) : .prefer(context)
            }
        } catch let error as PostgresLocationError {
            throw error
        } catch {
            throw PostgresLocationError("TLS cannot be set up: \(error)")
        }
        var configuration = PostgresConnection.Configuration(
            host: host, port: port, username: username, password: password, database: database, tls: mode)
        if let schema { configuration.options.additionalStartupParameters = [("search_path", schema)] }
        return configuration
    }

    /// TLS as `tls` and `sslrootcert` say, and whether it is required; `nil` for plain TCP.
    private func tlsConfiguration() throws(PostgresLocationError) -> (TLSConfiguration, required: Bool)? {
        var tlsConfiguration = TLSConfiguration.makeClientConfiguration()
        if let rootCertificatePath {
            do {
                tlsConfiguration.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(rootCertificatePath))
            } catch {
                throw PostgresLocationError("sslrootcert \(rootCertificatePath) is not a readable PEM file of certificates")
            }
        }
        switch tls {
        case .disable:
            return nil
        case .prefer:
            tlsConfiguration.certificateVerification = .none
            return (tlsConfiguration, false)
        case .require:
            tlsConfiguration.certificateVerification = rootCertificatePath == nil ? .none : .noHostnameVerification
            return (tlsConfiguration, true)
        case .verifyFull:
            tlsConfiguration.certificateVerification = .fullVerification
            return (tlsConfiguration, true)
        }
    }
}

/// Why a PostgreSQL URL was refused; never quotes the password.
public struct PostgresLocationError: Error, Sendable, CustomStringConvertible {
    public var description: String

    init(_ description: String) {
        self.description = description
    }
}
