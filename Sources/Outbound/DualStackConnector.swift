import NIOCore
import NIOPosix
import Synchronization

/// How the server connects out, for every client it has (FCM, token endpoints, the mirror,
/// webhooks, and any channel to come): every address of a name is tried as RFC 8305 (Happy
/// Eyeballs) says, not only the first the resolver gives.
///
/// The addresses are tried IPv6 first, alternating families; the next attempt starts 250 ms after
/// the one before, or at once when it fails; the first to connect wins, and the others are closed.
/// A name whose first address is `::1` while the upstream listens only on `127.0.0.1` (Debian's own
/// hosts file maps `localhost` to both) connects to `127.0.0.1` at once, after `::1` refuses.
///
/// The race is NIO's (`HappyEyeballsConnector`, behind `ClientBootstrap.connect(host:port:)`); what
/// this type adds is the addresses a caller already has (a webhook's, each checked against the URL
/// policy), a resolver a test can replace, and an error in plain words (`ConnectionFailure`).
/// `initializer` runs once for each attempt, on that attempt's own channel: handlers made inside
/// it belong to one connection only, and the caller finds its handlers in the winner's pipeline.
public enum DualStackConnector {
    /// A name's addresses (their port is replaced): a test's resolver, or addresses already checked.
    public typealias Resolve = @Sendable (_ host: String) async throws -> [SocketAddress]

    /// Connects to `host`'s addresses on `port`, racing them.
    /// - Parameters:
    ///   - resolve: the name's addresses; `nil` asks the system (`getaddrinfo`).
    ///   - loop: the event loop every attempt's channel is on.
    ///   - timeout: for the whole race, resolution included.
    /// - Throws: `ConnectionFailure`, in plain words.
    public static func connect(
        host: String, port: Int, resolve: Resolve? = nil, on loop: any EventLoop, timeout: Duration,
        initializer: @escaping @Sendable (any Channel) -> EventLoopFuture<Void>
    ) async throws -> any Channel {
        var addresses: [SocketAddress]?
        if let resolve {
            do {
                addresses = try await resolve(host).map { try $0.withPort(port) }
            } catch {
                throw ConnectionFailure.noAddress(name: host, because: error)
            }
            if addresses?.isEmpty == true { throw ConnectionFailure.noAddress(name: host, because: nil) }
        }
        // Requests go out as soon as they are written: the clients flush whole requests.
        var bootstrap = ClientBootstrap(group: loop)
            .channelOption(.socketOption(.tcp_nodelay), value: 1)
            .connectTimeout(TimeAmount(timeout))
            .channelInitializer(initializer)
        if let addresses { bootstrap = bootstrap.resolver(FixedAddresses(addresses, loop: loop)) }
        // Cancelled (the server stops), the wait ends at once; a connection made after that is closed.
        let connecting = bootstrap.connect(host: host, port: port)
        let outcome = loop.makePromise(of: (any Channel).self)
        let settled = Settled()
        connecting.whenComplete { result in
            if settled.settle() {
                outcome.completeWith(result)
            } else if case .success(let late) = result {
                late.close(promise: nil)
            }
        }
        do {
            return try await withTaskCancellationHandler {
                try await outcome.futureResult.get()
            } onCancel: {
                if settled.settle() { outcome.fail(CancellationError()) }
            }
        } catch is CancellationError {
            throw CancellationError()
        } catch {
            throw ConnectionFailure(error, host: host, port: port, timeout: timeout)
        }
    }

    /// Whether the race's outcome was taken yet: by the race, or by a cancellation.
    private final class Settled: Sendable {
        private let done = Mutex(false)

        /// True for the first caller only.
        func settle() -> Bool {
            done.withLock { done in
                defer { done = true }
                return !done
            }
        }
    }
}

extension DualStackConnector {
    /// Connects as `connect(host:port:resolve:on:timeout:initializer:)` does, with `handlers`
    /// making each attempt's pipeline (on its event loop) and returning what the caller talks to:
    /// the winner's, even when its connection has already failed (a TLS handshake refused at once)
    /// and its pipeline is gone.
    public static func connect<Made: Sendable>(
        host: String, port: Int, resolve: Resolve? = nil, on loop: any EventLoop, timeout: Duration,
        handlers: @escaping @Sendable (any Channel) throws -> Made
    ) async throws -> (channel: any Channel, made: Made) {
        let attempts = Attempts<Made>()
        let channel = try await connect(host: host, port: port, resolve: resolve, on: loop, timeout: timeout) {
            channel in
            channel.eventLoop.makeCompletedFuture {
                let made = try handlers(channel)
                attempts.made.withLock { $0[ObjectIdentifier(channel)] = made }
            }
        }
        guard let made = attempts.made.withLock({ $0[ObjectIdentifier(channel)] }) else {
            channel.close(promise: nil)
            throw ConnectionFailure("cannot connect to \(host): the connection has no pipeline")
        }
        return (channel, made)
    }

    /// What each attempt's pipeline made, by its channel.
    private final class Attempts<Made: Sendable>: Sendable {
        let made = Mutex<[ObjectIdentifier: Made]>([:])
    }
}

/// A resolver that answers with addresses known already, each family to its own query, in their
/// order: NIO's race then takes them as RFC 8305 says.
struct FixedAddresses: Resolver, Sendable {
    let addresses: [SocketAddress]
    let loop: any EventLoop

    init(_ addresses: [SocketAddress], loop: any EventLoop) {
        self.addresses = addresses
        self.loop = loop
    }

    func initiateAQuery(host: String, port: Int) -> EventLoopFuture<[SocketAddress]> {
        loop.makeSucceededFuture(addresses.filter { $0.protocol == .inet })
    }

    func initiateAAAAQuery(host: String, port: Int) -> EventLoopFuture<[SocketAddress]> {
        loop.makeSucceededFuture(addresses.filter { $0.protocol == .inet6 })
    }

    func cancelQueries() {}
}

extension SocketAddress {
    /// The address with another port.
    func withPort(_ port: Int) throws -> SocketAddress {
        guard let ip = ipAddress else { return self }
        return try SocketAddress(ipAddress: ip, port: port)
    }

    /// `127.0.0.1:8443`, `[::1]:8443`: how the server names an address in its words.
    public var shownWithPort: String {
        guard let ip = ipAddress else { return "\(self)" }
        let host = self.protocol == .inet6 ? "[\(ip)]" : ip
        return port.map { "\(host):\($0)" } ?? host
    }
}
