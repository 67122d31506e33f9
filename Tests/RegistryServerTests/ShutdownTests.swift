import Foundation
import HummingbirdTesting
import Registry
import Synchronization
import Testing

#if canImport(Glibc)
    import Glibc
#endif

/// `serve` as a process, stopped with SIGTERM while a client stalls mid-body, or while the relay
/// waits on an upstream that never answers.
@Suite("Shutdown")
struct ShutdownTests {
    @Test(
        "SIGTERM with a client stalled mid-body: the server exits 0 once the shutdown deadline has passed",
        .enabled(if: ServeProcess.available))
    func stopsDespiteStalledClient() async throws {
        let server = try ServeProcess(["--shutdown-deadline", "1s", "--body-timeout", "10m", "--idle-timeout", "10m"])
        let stalled = try await server.connect()
        let key = try await server.key()
        // Declares 1000 bytes, sends one: without a deadline, this kept the process alive.
        await stalled.send(
            "POST /fcm/send HTTP/1.1\r\nHost: x\r\nAuthorization: key=\(key)\r\nContent-Length: 1000\r\n\r\n{")
        try await Task.sleep(for: .milliseconds(200))
        let ended = try await server.terminate(waiting: 30)
        #expect(ended)
        if ended {
            #expect(server.process.terminationStatus == 0)
        }
    }

    /// The upstream takes the TLS connection and every HTTP/2 request, and never answers. SIGTERM
    /// while the topic's page waits: the page's requests end within the shutdown deadline, the
    /// process exits 0 (it crashed with SIGILL once cancellation outlasted its allowance), and the
    /// next start finds every recipient still pending, none failed.
    @Test(
        "SIGTERM while a relay page waits on a silent upstream: exit 0 within the deadline, the page pending for the next start",
        .enabled(if: ServeProcess.available), .timeLimit(.minutes(2)))
    func stopsWhileThePageWaitsOnASilentUpstream() async throws {
        let certificates = try TestCertificates()
        let requests = RequestCount()
        let silent = try await TestHTTP2Server(certificates: certificates.files) { _ in
            requests.value.add(1, ordering: .relaxed)
            return nil
        }
        let caFile = certificates.files.caCertificate
        let upstream = try await Fixture.make()
        try await upstream.test(.live) { upstreamClient in
            let port = try #require(upstreamClient.client.port)
            let options = [
                "--shutdown-deadline", "4s", "--relay-ca-file", caFile,
                "--relay-poll-interval", "100ms",
            ]
            let server = try ServeProcess(options)
            let key = try await server.key()
            try await RelayProcessTests.relay(
                server.database, to: upstream, port: port, sendingTo: "https://127.0.0.1:\(silent.port)")
            let tokens = (1...50).map(token)
            try await RelayProcessTests.post(
                server, "/iid/v1:batchAdd", key: key,
                #"{"to":"/topics/news","registration_tokens":\#(jsonArray(tokens))}"#)
            let sent = try await RelayProcessTests.post(server, "/fcm/send", key: key, #"{"to":"/topics/news","data":{"k":"v"}}"#)
            let id = try #require(sent["message_id"].flatMap { if case .number(let n) = $0 { Int64(n) } else { nil } })
            try await waitUntil(30) { requests.value.load(ordering: .relaxed) >= tokens.count }

            // Within the 4 s deadline, and the 5 s of cancellation after it that crashed.
            let ended = try await server.terminate(waiting: 9)
            #expect(ended, "still running 9 s after SIGTERM")
            if ended {
                #expect(server.process.terminationReason == .exit)
                #expect(server.process.terminationStatus == 0)
            }
            let next = try ServeProcess(options, database: server.database)
            let message = try await RelayProcessTests.get(next, "/api/messages/\(id)", key: key)
            #expect(message["delivery"] == ["pending": 50, "delivered": 0, "failed": 0, "cancelled": 0])
            let nextEnded = try await next.terminate(waiting: 9)
            #expect(nextEnded)
        }
        await silent.stop()
        withExtendedLifetime(certificates) {}
    }

    final class RequestCount: Sendable {
        let value = Atomic<Int>(0)
    }
}
