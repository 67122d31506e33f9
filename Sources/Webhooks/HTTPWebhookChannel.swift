import AsyncHTTPClient
import Delivery
import Foundation
import NIOCore
import NIOHTTP1
import NIOSSL
import Registry

/// Webhooks over HTTP: one signed POST per event, to an address checked first.
///
/// Every attempt resolves the URL's name itself and checks each address it gets (`WebhookURLPolicy`),
/// then connects to the address it checked, with the name as TLS SNI and `Host`: a name whose
/// DNS answer changes after registration (DNS rebinding) cannot move a webhook onto the server's
/// own network. No redirect is followed, no proxy is used, an attempt ends after
/// `options.timeout`, and at most `options.answerBytes` of an answer are read.
public struct HTTPWebhookChannel: WebhookChannel {
    let options: WebhookOptions
    let tls: TLSConfiguration

    /// - Parameter caFile: a PEM file of CA certificates trusted besides the system's.
    public init(options: WebhookOptions, caFile: String? = nil) {
        self.options = options
        var tls = TLSConfiguration.makeClientConfiguration()
        if let caFile { tls.additionalTrustRoots = [.file(caFile)] }
        self.tls = tls
    }

    public func send(_ delivery: WebhookDelivery) async -> WebhookAttemptResult {
        let policy = options.urlPolicy
        let deadline = ContinuousClock.now + options.timeout
        let target: WebhookURLPolicy.Target
        let addresses: [String]
        do {
            target = try policy.target(of: delivery.url)
            addresses = try await policy.addresses(of: target)
        } catch {
            return .failed(error.refusalText)
        }
        // Each address checked, in the resolver's order, until one answers: every one of them
        // passed the rules, so none is a way in.
        var result = WebhookAttemptResult.failed("no address")
        for address in addresses where ContinuousClock.now < deadline {
            var configuration = HTTPClient.Configuration(
                tlsConfiguration: tls, redirectConfiguration: .disallow,
                timeout: .init(
                    connect: .seconds(Int64(options.timeout.components.seconds)),
                    read: .seconds(Int64(options.timeout.components.seconds))))
            configuration.dnsOverride = [target.host: address]
            configuration.decompression = .disabled
            configuration.httpVersion = .http1Only
            // A refused connection is this attempt's failure at once: the schedule retries it, and
            // the next address gets its turn.
            configuration.connectionPool.retryConnectionEstablishment = false
            let client = HTTPClient(eventLoopGroupProvider: .singleton, configuration: configuration)
            result = await post(delivery, with: client, deadline: deadline)
            try? await client.shutdown()
            // An answer, whatever it says, ends the attempt; only a connection that failed tries the next address.
            if case .failed(let words) = result, !words.hasPrefix("HTTP ") { continue }
            return result
        }
        return result
    }

    public func shutdown() async {}

    private func post(_ delivery: WebhookDelivery, with client: HTTPClient, deadline: ContinuousClock.Instant) async
        -> WebhookAttemptResult
    {
        let timestamp = Int64(Date().timeIntervalSince1970)
        var request = HTTPClientRequest(url: delivery.url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "User-Agent", value: "fcm-registry-webhooks")
        request.headers.add(name: "webhook-id", value: delivery.eventID)
        request.headers.add(name: "webhook-timestamp", value: String(timestamp))
        request.headers.add(
            name: "webhook-signature",
            value: WebhookSignature.header(
                id: delivery.eventID, timestamp: timestamp, body: delivery.payload,
                secrets: [delivery.secret] + (delivery.previousSecret.map { [$0] } ?? [])))
        request.body = .bytes(ByteBuffer(string: delivery.payload))
        let prepared = request
        let limit = options.answerBytes
        do {
            return try await withThrowingTaskGroup(of: WebhookAttemptResult.self) { group in
                group.addTask {
                    let remaining = deadline - ContinuousClock.now
                    let response = try await client.execute(
                        prepared, timeout: .nanoseconds(max(1, remaining.nanoseconds)))
                    // At most `limit` bytes of the answer, whatever it says its length is.
                    var answer: [UInt8] = []
                    for try await chunk in response.body {
                        answer += chunk.readableBytesView.prefix(limit - answer.count)
                        if answer.count >= limit { break }
                    }
                    let status = Int(response.status.code)
                    if (200..<300).contains(status) { return .delivered }
                    let text = Self.escaped(String(decoding: answer.prefix(200), as: UTF8.self))
                    return .failed("HTTP \(status)" + (text.isEmpty ? "" : ": \(text)"))
                }
                group.addTask {
                    try await Task.sleep(until: deadline)
                    return .failed("no answer within \(options.timeout.nanoseconds / 1_000_000_000) s")
                }
                let first = try await group.next() ?? .failed("no answer")
                group.cancelAll()
                return first
            }
        } catch {
            return .failed(Self.describe(error))
        }
    }

    /// A connection failure in words, without the URL's secrets (there are none in a checked URL).
    static func describe(_ error: any Error) -> String {
        if let client = error as? HTTPClientError {
            switch client {
            case .deadlineExceeded, .readTimeout, .connectTimeout: return "no answer in time"
            case .remoteConnectionClosed: return "the connection closed before an answer"
            default: return escaped("\(client)")
            }
        }
        return escaped("connection failed: \(error)")
    }

    /// Text from the network, safe to store, show and log: printable ASCII kept, the rest as
    /// `\u{…}`, at most 300 characters.
    static func escaped(_ text: String) -> String {
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

extension Error {
    /// A refusal's words, or the error described.
    fileprivate var refusalText: String {
        if let registry = self as? RegistryError, case .invalidWebhookURL(let message) = registry { return message }
        return HTTPWebhookChannel.escaped("\(self)")
    }
}
