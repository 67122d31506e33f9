import Foundation
import Testing

/// `serve` as a process (the connection limit belongs to its listener), filled with silent sockets.
@Suite("Connection limit")
struct ConnectionLimitTests {
    /// Without room made, the new client would wait in the accept queue until a header or idle
    /// timeout (10 minutes here) freed a slot, and its read would give up empty after 10 s.
    @Test(
        "At the connection limit, a new client gets in: the connection silent longest gives way, never one mid-request",
        .enabled(if: ServeProcess.available))
    func silentConnectionsMakeRoom() async throws {
        let server = try ServeProcess([
            "--max-connections", "3", "--header-timeout", "10m", "--body-timeout", "10m", "--idle-timeout", "10m",
        ])
        let busy = try await server.connect()
        let key = try await server.key()
        let condition = #"{"condition":"'a' in topics"}"#
        await busy.send(
            "POST /api/conditions:check HTTP/1.1\r\nHost: x\r\nAuthorization: key=\(key)\r\n"
                + "Content-Type: application/json\r\nContent-Length: \(condition.utf8.count)\r\n\r\n"
                + condition.prefix(10))
        let silent = try RawConnection(port: server.port)
        // Long enough for it to be allowed to give way (`SilentConnections.grace`).
        try await Task.sleep(for: .milliseconds(1200))

        // The limit (3) is reached with this one; the one silent longest gives way to it.
        let last = try RawConnection(port: server.port)
        let newcomer = try RawConnection(port: server.port)
        await newcomer.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n")
        #expect(await newcomer.read(until: "\r\n\r\n").hasPrefix("HTTP/1.1 200"))
        let (text, closed) = await silent.readUntilClosed()
        #expect(text.isEmpty && closed)

        // The request in progress was left alone and is answered once its body is in.
        await busy.send(String(condition.dropFirst(10)))
        #expect(await busy.read(until: "\r\n\r\n").hasPrefix("HTTP/1.1 200"))

        // Counted by reason, for operators: the log says it only once every few seconds. At least
        // the one that gave way to `last`; `last` itself may have given way to the newcomer by
        // now (it has been silent since it connected).
        newcomer.drop()
        #expect((try await server.metric(#"fcm_registry_connections_closed_total{reason="making_room"}"#) ?? 0) >= 1)
        last.drop()
        try await server.terminate(waiting: 10)
    }
}
