import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// The ports handed out so far in this test process: each once.
private let handedOut = Mutex<Set<Int>>([])

/// A loopback port no one listens on right now, for a server a test starts or for a place
/// nothing answers: one that binds, below the system's ephemeral ports (32768 and up, Linux's
/// default), and not handed out before in this process.
///
/// Below the ephemeral range because a port the system picks (bound, then closed) may be given
/// again as the local port of another test's outgoing connection before the server binds it; and
/// a client retrying a port nobody listens on yet may even be connected to itself (TCP's
/// simultaneous open, when the local port picked for it is the one it calls), and then "connects"
/// to no server at all.
public func unusedLoopbackPort() -> Int {
    while true {
        let port = Int.random(in: 20_000..<32_768)
        guard handedOut.withLock({ $0.insert(port).inserted }), bindsNow(port) else { continue }
        return port
    }
}

/// Whether a socket binds 127.0.0.1:`port` now (and is closed at once).
private func bindsNow(_ port: Int) -> Bool {
    let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard descriptor >= 0 else { return false }
    defer { close(descriptor) }
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(descriptor, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) == 0
        }
    }
}
