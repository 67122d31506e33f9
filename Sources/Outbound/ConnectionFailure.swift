import Foundation
import NIOCore
import NIOPosix
import NIOSSL

/// A connection that could not be made, in the words a user reads in a webhook's or the relay's
/// `lastError` and in the log: "connection refused by 127.0.0.1:8443", "timed out after 10 s
/// connecting to fcm.example:443", "TLS handshake failed: certificate verify failed", "no address
/// for name fcm.example". Never NIO's type dump; always short, printable ASCII.
public struct ConnectionFailure: Error, CustomStringConvertible, Sendable, Equatable {
    public let description: String

    public init(_ words: String) {
        description = Self.escaped(words)
    }

    /// The name resolved to nothing usable.
    static func noAddress(name: String, because error: (any Error)?) -> ConnectionFailure {
        ConnectionFailure("no address for name \(name)")
    }

    /// A failed race (NIO's `NIOConnectionError`, a timeout) in words.
    public init(_ error: any Error, host: String, port: Int, timeout: Duration?) {
        let target = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        switch error {
        case ChannelError.connectTimeout(let after):
            self.init(
                "timed out after \(Self.seconds(timeout ?? .nanoseconds(after.nanoseconds))) connecting to \(target)")
        case let race as NIOConnectionError:
            let failures = race.connectionErrors
            if failures.isEmpty {
                self.init("no address for name \(host)")
            } else if failures.allSatisfy({ ($0.error as? IOError)?.errnoCode == ECONNREFUSED }) {
                self.init("connection refused by " + Self.list(failures.map(\.target.shownWithPort)))
            } else if failures.allSatisfy({ Self.isTimeout($0.error) }) {
                self.init(
                    "timed out" + (timeout.map { " after \(Self.seconds($0))" } ?? "") + " connecting to \(target)")
            } else {
                self.init(
                    "cannot connect to "
                        + failures.map { "\($0.target.shownWithPort) (\(Self.words(for: $0.error)))" }.joined(
                            separator: ", "))
            }
        default:
            self.init("cannot connect to \(target): \(Self.words(for: error))")
        }
    }

    /// Any error met on an outgoing connection, in plain words: a `ConnectionFailure` as it is, a
    /// TLS failure as "TLS handshake failed: …", a system call's error by its `strerror`.
    public static func words(for error: any Error) -> String {
        switch error {
        case let failure as ConnectionFailure:
            return failure.description
        case let race as NIOConnectionError:
            return ConnectionFailure(race, host: race.host, port: race.port, timeout: nil).description
        case let tls as NIOSSLError:
            switch tls {
            case .handshakeFailed(let reason): return escaped("TLS handshake failed: \(words(forBoringSSL: reason))")
            case .uncleanShutdown: return "the connection closed without ending TLS"
            default: return escaped("TLS failed: \(tls)")
            }
        case let reason as BoringSSLError:
            return escaped("TLS handshake failed: \(words(forBoringSSL: reason))")
        case let extra as NIOSSLExtraError:
            // "…: Couldn't find <name> in certificate from peer": the part after the type's name.
            let text = "\(extra)"
            let said = text.split(separator: ":", maxSplits: 1).last.map { $0.trimmingCharacters(in: .whitespaces) }
            return escaped("TLS handshake failed: \(said ?? text)")
        case let io as IOError:
            return escaped(String(cString: strerror(io.errnoCode)).lowercased())
        case ChannelError.connectTimeout(let after):
            return "timed out after \(seconds(.nanoseconds(after.nanoseconds))) connecting"
        case ChannelError.eof, ChannelError.ioOnClosedChannel, ChannelError.alreadyClosed:
            return "the connection closed"
        default:
            return escaped("\(error)")
        }
    }

    /// BoringSSL's reason (`…:CERTIFICATE_VERIFY_FAILED`) as words: "certificate verify failed".
    private static func words(forBoringSSL error: BoringSSLError) -> String {
        switch error {
        case .sslError(let stack), .unknownError(let stack):
            // "Error: 268435581 error:1000007d:SSL routines:OPENSSL_internal:CERTIFICATE_VERIFY_FAILED at …":
            // the reason is the capitals' word.
            let reasons = stack.map { entry -> String in
                let text = "\(entry)"
                guard let reason = text.firstMatch(of: /:([A-Z][A-Z0-9_]{3,})(?:\s|$)/) else { return text }
                return reason.output.1.replacingOccurrences(of: "_", with: " ").lowercased()
            }
            return reasons.isEmpty ? "refused" : reasons.joined(separator: ", ")
        case .zeroReturn, .syscallError: return "the connection closed"
        default: return "\(error)"
        }
    }

    private static func isTimeout(_ error: any Error) -> Bool {
        if case ChannelError.connectTimeout = error { return true }
        return (error as? IOError)?.errnoCode == ETIMEDOUT
    }

    private static func list(_ items: [String]) -> String {
        items.count <= 1 ? items.joined() : items.dropLast().joined(separator: ", ") + " and " + items.last!
    }

    /// "10 s", "1.5 s": to a tenth (a deadline's remainder, 9.998 s, reads as the 10 s it was).
    public static func seconds(_ duration: Duration) -> String {
        let tenths =
            (duration.components.seconds * 1000 + duration.components.attoseconds / 1_000_000_000_000_000 + 50) / 100
        return tenths % 10 == 0 ? "\(tenths / 10) s" : "\(tenths / 10).\(tenths % 10) s"
    }

    /// Text safe to store, show and log: printable ASCII kept, the rest as `\u{…}`, at most 300
    /// characters.
    public static func escaped(_ text: String) -> String {
        var out = ""
        for scalar in text.unicodeScalars.prefix(300) {
            if (0x20...0x7E).contains(scalar.value) {
                out.unicodeScalars.append(scalar)
            } else {
                out += "\\u{\(String(scalar.value, radix: 16))}"
            }
        }
        return out
    }
}
