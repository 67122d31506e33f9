import Delivery
import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import Outbound
import Registry

/// Webhooks over HTTP: one signed POST per event, to an address checked first.
///
/// Every attempt resolves the URL's name itself and checks each address it gets (`WebhookURLPolicy`),
/// then connects only to the addresses it checked, with the name as TLS SNI and `Host`: a name whose
/// DNS answer changes after registration (DNS rebinding) cannot move a webhook onto the server's
/// own network. The checked addresses are raced as RFC 8305 says (`DualStackConnector`): IPv6
/// first, the next 250 ms later or at once when one fails, the first to connect wins. No redirect
/// is followed, no proxy is used, an attempt ends after `options.timeout`, and at most
/// `options.answerBytes` of an answer are read.
public struct HTTPWebhookChannel: WebhookChannel {
    let options: WebhookOptions
    /// TLS for `https` URLs, or why there is none (a CA file that cannot be read).
    let tls: Result<NIOSSLContext, ConnectionFailure>
    /// The checked addresses of a URL's host: the policy's, unless a test gives its own.
    let addresses: @Sendable (WebhookURLPolicy.Target) async throws -> [String]

    /// - Parameter caFile: a PEM file of CA certificates trusted besides the system's.
    public init(options: WebhookOptions, caFile: String? = nil) {
        let policy = options.urlPolicy
        self.init(options: options, caFile: caFile) { target in try await policy.addresses(of: target) }
    }

    /// With the addresses a test gives for each URL.
    init(
        options: WebhookOptions, caFile: String? = nil,
        addresses: @escaping @Sendable (WebhookURLPolicy.Target) async throws -> [String]
    ) {
        self.options = options
        self.addresses = addresses
        var configuration = TLSConfiguration.makeClientConfiguration()
        if let caFile { configuration.additionalTrustRoots = [.file(caFile)] }
        do {
            tls = .success(try NIOSSLContext(configuration: configuration))
        } catch {
            tls = .failure(ConnectionFailure("TLS cannot be set up: \(ConnectionFailure.words(for: error))"))
        }
    }

    public func send(_ delivery: WebhookDelivery) async -> WebhookAttemptResult {
        let deadline = ContinuousClock.now + options.timeout
        let target: WebhookURLPolicy.Target
        let checked: [SocketAddress]
        do {
            target = try options.urlPolicy.target(of: delivery.url)
            checked = try await addresses(target).map { try SocketAddress(ipAddress: $0, port: target.port) }
        } catch {
            return .failed(error.refusalText)
        }
        do {
            return try await post(delivery, to: target, at: checked, deadline: deadline)
        } catch {
            return .failed(ConnectionFailure.words(for: error))
        }
    }

    public func shutdown() async {}

    /// Connects to the first of `checked` to answer, posts the event, and reads the answer.
    private func post(
        _ delivery: WebhookDelivery, to target: WebhookURLPolicy.Target, at checked: [SocketAddress],
        deadline: ContinuousClock.Instant
    ) async throws -> WebhookAttemptResult {
        let context: NIOSSLContext? = target.isHTTPS ? try tls.get() : nil
        // An IP address is no server name: TLS sends none (SNI), and the certificate must name the address.
        let isAddress = (try? SocketAddress(ipAddress: target.host, port: target.port)) != nil
        let limit = options.answerBytes
        let seconds = options.timeout.components.seconds
        let loop = MultiThreadedEventLoopGroup.singleton.next()
        let onlyChecked: DualStackConnector.Resolve = { _ in checked }
        let (channel, reader) = try await DualStackConnector.connect(
            host: target.host, port: target.port, resolve: onlyChecked, on: loop, timeout: deadline - .now
        ) { channel in
            let sync = channel.pipeline.syncOperations
            if let context {
                try sync.addHandler(
                    NIOSSLClientHandler(context: context, serverHostname: isAddress ? nil : target.host))
            }
            try sync.addHTTPClientHandlers()
            let reader = AnswerReader(limit: limit, loop: channel.eventLoop)
            try sync.addHandler(reader)
            return reader
        }
        let answer = reader.answer.futureResult
        let timer = channel.eventLoop.scheduleTask(deadline: .now() + TimeAmount(deadline - .now)) {
            reader.fail(ConnectionFailure("no answer within \(seconds) s"))
            channel.close(promise: nil)
        }
        answer.whenComplete { _ in timer.cancel() }
        channel.write(HTTPClientRequestPart.head(Self.request(delivery, to: target)), promise: nil)
        channel.write(HTTPClientRequestPart.body(.byteBuffer(ByteBuffer(string: delivery.payload))), promise: nil)
        channel.writeAndFlush(HTTPClientRequestPart.end(nil), promise: nil)
        let answered = try await withTaskCancellationHandler {
            try await answer.get()
        } onCancel: {
            channel.close(promise: nil)
        }
        channel.close(promise: nil)
        if (200..<300).contains(answered.status) { return .delivered }
        let text = Self.escaped(String(decoding: answered.body.prefix(200), as: UTF8.self))
        return .failed("HTTP \(answered.status)" + (text.isEmpty ? "" : ": \(text)"))
    }

    /// The POST with the Standard Webhooks headers, signed with the current secret and, after a
    /// rotation, the previous one.
    static func request(_ delivery: WebhookDelivery, to target: WebhookURLPolicy.Target) -> HTTPRequestHead {
        let timestamp = Int64(Date().timeIntervalSince1970)
        let url = URLComponents(string: delivery.url)
        let path = (url?.percentEncodedPath).flatMap { $0.isEmpty ? nil : $0 } ?? "/"
        let query = url?.percentEncodedQuery.map { "?\($0)" } ?? ""
        let name = target.host.contains(":") ? "[\(target.host)]" : target.host
        let host = target.port == (target.isHTTPS ? 443 : 80) ? name : "\(name):\(target.port)"
        var headers = HTTPHeaders()
        headers.add(name: "Host", value: host)
        headers.add(name: "Content-Type", value: "application/json")
        headers.add(name: "Content-Length", value: String(delivery.payload.utf8.count))
        headers.add(name: "User-Agent", value: "fcm-registry-webhooks")
        headers.add(name: "Connection", value: "close")
        headers.add(name: "webhook-id", value: delivery.eventID)
        headers.add(name: "webhook-timestamp", value: String(timestamp))
        headers.add(
            name: "webhook-signature",
            value: WebhookSignature.header(
                id: delivery.eventID, timestamp: timestamp, body: delivery.payload,
                secrets: [delivery.secret] + (delivery.previousSecret.map { [$0] } ?? [])))
        return HTTPRequestHead(version: .http1_1, method: .POST, uri: path + query, headers: headers)
    }

    /// Text from the network, safe to store, show and log: printable ASCII kept, the rest as
    /// `\u{…}`, at most 300 characters.
    static func escaped(_ text: String) -> String {
        ConnectionFailure.escaped(text)
    }
}

/// Reads one answer: its status, and at most `limit` bytes of its body, whatever it says its
/// length is. Used on its connection's event loop only.
final class AnswerReader: ChannelInboundHandler, @unchecked Sendable {
    typealias InboundIn = HTTPClientResponsePart

    struct Answer: Sendable {
        var status: Int
        var body: [UInt8]
    }

    let answer: EventLoopPromise<Answer>
    private let limit: Int
    private var status: Int?
    private var body: [UInt8] = []
    private var done = false

    init(limit: Int, loop: any EventLoop) {
        self.limit = limit
        answer = loop.makePromise()
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        switch unwrapInboundIn(data) {
        case .head(let head):
            // An interim 1xx answer is followed by the real one.
            if head.status.code >= 200, status == nil { status = Int(head.status.code) }
        case .body(let bytes):
            body += bytes.readableBytesView.prefix(max(0, limit - body.count))
            if body.count >= limit { finish(context: context) }
        case .end:
            finish(context: context)
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        fail(error)
        context.close(promise: nil)
    }

    func channelInactive(context: ChannelHandlerContext) {
        fail(ConnectionFailure("the connection closed before an answer"))
        context.fireChannelInactive()
    }

    func fail(_ error: any Error) {
        guard !done else { return }
        done = true
        answer.fail(error)
    }

    private func finish(context: ChannelHandlerContext) {
        guard !done, let status else { return }
        done = true
        answer.succeed(Answer(status: status, body: body))
        context.close(promise: nil)
    }

    func handlerRemoved(context: ChannelHandlerContext) {
        fail(ConnectionFailure("the connection closed before an answer"))
    }
}

extension Error {
    /// A refusal's words, or the error described.
    fileprivate var refusalText: String {
        if let registry = self as? RegistryError, case .invalidWebhookURL(let message) = registry { return message }
        return ConnectionFailure.words(for: self)
    }
}
