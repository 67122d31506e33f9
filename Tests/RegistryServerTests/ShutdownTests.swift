import Foundation
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// `serve` as a process, stopped with SIGTERM while a client stalls mid-body.
@Suite("Shutdown")
struct ShutdownTests {
    static let binary = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent(".build/debug/fcm-registry").path

    static func freePort() -> Int {
        let descriptor = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(descriptor) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(descriptor, $0, length)
                return getsockname(descriptor, $0, &length)
            }
        }
        return Int(UInt16(bigEndian: address.sin_port))
    }

    @Test(
        "SIGTERM with a client stalled mid-body: the server exits 0 once the shutdown deadline has passed",
        .enabled(if: FileManager.default.isExecutableFile(atPath: binary)))
    func stopsDespiteStalledClient() async throws {
        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("shutdown-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let port = Self.freePort()
        let server = Process()
        server.executableURL = URL(fileURLWithPath: Self.binary)
        server.arguments = [
            "serve", "--port", "\(port)", "--db", folder.appendingPathComponent("r.sqlite").path,
            "--key-file", folder.appendingPathComponent("key.json").path, "--shutdown-deadline", "1s",
            "--body-timeout", "10m", "--idle-timeout", "10m", "--log-level", "warning",
        ]
        server.standardOutput = FileHandle.nullDevice
        server.standardError = FileHandle.nullDevice
        try server.run()
        defer { if server.isRunning { kill(server.processIdentifier, SIGKILL) } }

        var connection: RawConnection?
        for _ in 0..<100 where connection == nil {
            connection = try? RawConnection(port: port)
            if connection == nil { try await Task.sleep(for: .milliseconds(100)) }
        }
        let stalled = try #require(connection)
        let key = try await Self.key(in: folder)
        // Declares 1000 bytes, sends one: without a deadline, this kept the process alive.
        await stalled.send(
            "POST /fcm/send HTTP/1.1\r\nHost: x\r\nAuthorization: key=\(key)\r\nContent-Length: 1000\r\n\r\n{")
        try await Task.sleep(for: .milliseconds(200))
        kill(server.processIdentifier, SIGTERM)
        for _ in 0..<300 where server.isRunning { try await Task.sleep(for: .milliseconds(100)) }
        #expect(!server.isRunning)
        if !server.isRunning {
            #expect(server.terminationStatus == 0)
        }
    }

    static func key(in folder: URL) async throws -> String {
        let file = folder.appendingPathComponent("key.json")
        for _ in 0..<100 {
            if let data = try? Data(contentsOf: file),
                let object = try? JSONSerialization.jsonObject(with: data) as? [String: Any],
                let key = object["server_key"] as? String
            {
                return key
            }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw POSIXError(.ENOENT)
    }
}
