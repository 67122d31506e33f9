import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Which webhook URLs the server calls: `https` only, and only public addresses, checked when a
/// webhook is registered and again, after resolving the name, at every connection, so that DNS
/// cannot move a webhook onto the server's own network (SSRF). `--webhook-allow-private-networks`
/// lifts both rules, for a receiver on the same host or network.
public struct WebhookURLPolicy: Sendable, Hashable {
    public var allowPrivateNetworks: Bool

    public init(allowPrivateNetworks: Bool = false) {
        self.allowPrivateNetworks = allowPrivateNetworks
    }

    /// A URL's parts the sender needs.
    public struct Target: Sendable, Hashable {
        public var isHTTPS: Bool
        /// The host as the URL names it, without IPv6 brackets.
        public var host: String
        public var port: Int
    }

    /// The longest URL accepted (Stripe's and Svix's endpoints allow about this much).
    public static let maximumLength = 2048

    /// Checks a URL's shape: absolute, `https` (or `http` with private networks allowed), a
    /// host, no user or password, no fragment.
    /// - Throws: `RegistryError.invalidWebhookURL`, saying why.
    public func target(of url: String) throws(RegistryError) -> Target {
        guard url.utf8.count <= Self.maximumLength else {
            throw .invalidWebhookURL("url is longer than \(Self.maximumLength) bytes")
        }
        if let fault = Self.firstFault(in: url) { throw .invalidWebhookURL(fault) }
        guard let components = URLComponents(string: url), let scheme = components.scheme?.lowercased(),
            let rawHost = components.host, !rawHost.isEmpty
        else {
            throw .invalidWebhookURL("url must be an absolute https URL, such as https://example.com/hooks")
        }
        guard scheme == "https" || (scheme == "http" && allowPrivateNetworks) else {
            throw .invalidWebhookURL(
                allowPrivateNetworks
                    ? "url must be https or http"
                    : "url must be https (http only with --webhook-allow-private-networks)")
        }
        guard components.user == nil, components.password == nil else {
            throw .invalidWebhookURL("url must not carry a user or password")
        }
        guard components.fragment == nil else { throw .invalidWebhookURL("url must not have a fragment") }
        var host = rawHost
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        let port = components.port ?? (scheme == "https" ? 443 : 80)
        guard (1...65535).contains(port) else { throw .invalidWebhookURL("url has no valid port") }
        return Target(isHTTPS: scheme == "https", host: host, port: port)
    }

    /// What makes `url` something other than a URI in RFC 3986's characters, in words: a byte
    /// outside its unreserved, reserved and `%` characters (a space, CR, LF, NUL, `<>"{}|\\^\``,
    /// anything not ASCII), or a `%` not followed by two hex digits; `nil` when there is none.
    /// Checked before parsing, so that nothing a lenient parser would let through (and nothing a
    /// NUL would cut short) is ever stored or requested.
    static func firstFault(in url: String) -> String? {
        let bytes = Array(url.utf8)
        var index = 0
        while index < bytes.count {
            let byte = bytes[index]
            if byte == UInt8(ascii: "%") {
                guard index + 2 < bytes.count, isHexDigit(bytes[index + 1]), isHexDigit(bytes[index + 2]) else {
                    return "url has a % at byte \(index + 1) that is not followed by two hex digits (RFC 3986)"
                }
                index += 3
                continue
            }
            guard allowed[Int(byte)] else {
                return "url has \(describe(byte)) at byte \(index + 1), which RFC 3986 does not allow in a URL: "
                    + "percent-encode it"
            }
            index += 1
        }
        return nil
    }

    /// RFC 3986's unreserved (`A–Z a–z 0–9 - . _ ~`) and reserved (`: / ? # [ ] @ ! $ & ' ( ) * + , ; =`)
    /// characters, by byte.
    private static let allowed: [Bool] = {
        var table = [Bool](repeating: false, count: 256)
        let characters = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~:/?#[]@!$&'()*+,;="
        for byte in characters.utf8 { table[Int(byte)] = true }
        return table
    }()

    private static func isHexDigit(_ byte: UInt8) -> Bool {
        (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains(byte)
            || (UInt8(ascii: "A")...UInt8(ascii: "F")).contains(byte)
    }

    /// A byte named so that a log or an answer shows it plainly, whatever it is.
    private static func describe(_ byte: UInt8) -> String {
        switch byte {
        case 0x20: "a space"
        case 0x0D: "a carriage return (CR)"
        case 0x0A: "a line feed (LF)"
        case 0x00: "a NUL byte"
        case 0x01..<0x20, 0x7F: "the control character 0x\(String(byte, radix: 16, uppercase: true))"
        case 0x80...: "a byte that is not ASCII (0x\(String(byte, radix: 16, uppercase: true)))"
        default: "'\(Character(Unicode.Scalar(byte)))'"
        }
    }

    /// The addresses to connect to for `target`: the name resolved, and every address checked.
    /// - Throws: `RegistryError.invalidWebhookURL` when the name does not resolve, or any of its
    ///   addresses is not a public one (unless private networks are allowed).
    public func addresses(of target: Target) async throws(RegistryError) -> [String] {
        let addresses: [IPAddress]
        do {
            addresses = try await Self.resolve(target.host, port: target.port)
        } catch {
            throw .invalidWebhookURL("url's host \(target.host) does not resolve")
        }
        guard !addresses.isEmpty else { throw .invalidWebhookURL("url's host \(target.host) does not resolve") }
        if !allowPrivateNetworks, let refused = addresses.first(where: { !$0.isPublic }) {
            throw .invalidWebhookURL(
                "url's host \(target.host) resolves to \(refused), which is not a public address (loopback, private, link-local, shared or reserved)"
            )
        }
        return addresses.map(\.description)
    }

    /// Resolves a name (an address literal resolves to itself) with the system's resolver, on a
    /// thread of its own: `getaddrinfo` blocks.
    static func resolve(_ host: String, port: Int) async throws -> [IPAddress] {
        try await withCheckedThrowingContinuation { continuation in
            DispatchQueue.global().async {
                var hints = addrinfo()
                hints.ai_family = AF_UNSPEC
                #if canImport(Glibc)
                    hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
                #else
                    hints.ai_socktype = SOCK_STREAM
                #endif
                var result: UnsafeMutablePointer<addrinfo>?
                let status = getaddrinfo(host, String(port), &hints, &result)
                guard status == 0 else {
                    continuation.resume(throwing: ResolutionFailed(status: status))
                    return
                }
                defer { freeaddrinfo(result) }
                var addresses: [IPAddress] = []
                var next = result
                while let info = next {
                    if let address = IPAddress(info.pointee.ai_addr), !addresses.contains(address) {
                        addresses.append(address)
                    }
                    next = info.pointee.ai_next
                }
                continuation.resume(returning: addresses)
            }
        }
    }

    struct ResolutionFailed: Error {
        var status: Int32
    }
}

/// An IPv4 or IPv6 address, as bytes.
public struct IPAddress: Sendable, Hashable, CustomStringConvertible {
    /// 4 bytes, or 16.
    public var bytes: [UInt8]

    public init?(bytes: [UInt8]) {
        guard bytes.count == 4 || bytes.count == 16 else { return nil }
        self.bytes = bytes
    }

    /// An address in text form (`192.0.2.1`, `2001:db8::1`), or `nil`.
    public init?(_ text: String) {
        var v4 = in_addr()
        if inet_pton(AF_INET, text, &v4) == 1 {
            self.bytes = withUnsafeBytes(of: &v4) { Array($0) }
            return
        }
        var v6 = in6_addr()
        if inet_pton(AF_INET6, text, &v6) == 1 {
            self.bytes = withUnsafeBytes(of: &v6) { Array($0) }
            return
        }
        return nil
    }

    init?(_ socketAddress: UnsafeMutablePointer<sockaddr>?) {
        guard let socketAddress else { return nil }
        switch Int32(socketAddress.pointee.sa_family) {
        case AF_INET:
            let address = socketAddress.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { $0.pointee.sin_addr }
            bytes = withUnsafeBytes(of: address) { Array($0) }
        case AF_INET6:
            let address = socketAddress.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { $0.pointee.sin6_addr }
            bytes = withUnsafeBytes(of: address) { Array($0) }
        default:
            return nil
        }
    }

    public var description: String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        let family = bytes.count == 4 ? AF_INET : AF_INET6
        let ok = bytes.withUnsafeBytes { raw in
            inet_ntop(family, raw.baseAddress, &buffer, socklen_t(buffer.count)) != nil
        }
        guard ok else { return "?" }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Whether a webhook may reach it: a global unicast address, not loopback, private (RFC
    /// 1918), shared (CGNAT, RFC 6598), link-local (cloud metadata at 169.254.169.254 among
    /// them), unique-local (fd00:ec2::254, AWS's metadata over IPv6, among them), documentation,
    /// benchmarking, multicast or reserved; an IPv6 address that carries an IPv4 one (mapped,
    /// compatible, NAT64, 6to4) only when that one is.
    public var isPublic: Bool {
        if bytes.count == 4 { return Self.isPublicV4(bytes) }
        let b = bytes
        // ::ffff:a.b.c.d (mapped) and ::a.b.c.d (compatible, deprecated; :: and ::1 among them).
        if b[0..<10].allSatisfy({ $0 == 0 }) && ((b[10] == 0xFF && b[11] == 0xFF) || (b[10] == 0 && b[11] == 0)) {
            return Self.isPublicV4(Array(b[12..<16]))
        }
        // 64:ff9b::/96, NAT64: the IPv4 address it stands for.
        if b[0] == 0x00, b[1] == 0x64, b[2] == 0xFF, b[3] == 0x9B, b[4..<12].allSatisfy({ $0 == 0 }) {
            return Self.isPublicV4(Array(b[12..<16]))
        }
        // 2002::/16, 6to4: the IPv4 address in bits 16–48.
        if b[0] == 0x20, b[1] == 0x02 { return Self.isPublicV4(Array(b[2..<6])) }
        // Global unicast is 2000::/3; everything else (fc00::/7, fe80::/10, ff00::/8, …) is not.
        guard b[0] & 0xE0 == 0x20 else { return false }
        // 2001::/32 Teredo, 2001:db8::/32 documentation, 2001:2::/48 benchmarking, 2001:10::/28 ORCHID.
        if b[0] == 0x20, b[1] == 0x01 {
            if b[2] == 0x00, b[3] == 0x00 { return false }
            if b[2] == 0x0D, b[3] == 0xB8 { return false }
            if b[2] == 0x00, b[3] == 0x02, b[4] == 0, b[5] == 0 { return false }
            if b[2] == 0x00, b[3] & 0xF0 == 0x10 { return false }
        }
        return true
    }

    static func isPublicV4(_ b: [UInt8]) -> Bool {
        switch (b[0], b[1], b[2]) {
        case (0, _, _): false  // "this network"
        case (10, _, _): false  // private
        case (100, 64...127, _): false  // shared address space (CGNAT); Alibaba's metadata at 100.100.100.200
        case (127, _, _): false  // loopback
        case (169, 254, _): false  // link-local; cloud metadata (169.254.169.254)
        case (172, 16...31, _): false  // private
        case (192, 0, 0), (192, 0, 2): false  // IETF protocol assignments, documentation
        case (192, 88, 99): false  // 6to4 relay anycast
        case (192, 168, _): false  // private
        case (198, 18...19, _): false  // benchmarking
        case (198, 51, 100), (203, 0, 113): false  // documentation
        case (224...255, _, _): false  // multicast, reserved, broadcast
        default: true
        }
    }
}
