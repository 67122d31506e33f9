import Foundation
import Testing

/// `serve` as a process, stopped with SIGTERM while a client stalls mid-body.
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
}
