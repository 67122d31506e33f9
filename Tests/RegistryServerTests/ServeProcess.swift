import Foundation
import TestBackends

#if canImport(Glibc)
    import Glibc
#endif

/// `fcm-registry serve` as a process, on a fresh database in a folder of its own and a free port:
/// for what belongs to the process (its signals, its listener's connection limit). Killed, and
/// its folder removed, when released.
final class ServeProcess {
    static let binary = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent().appendingPathComponent(".build/debug/fcm-registry").path
    /// Whether the executable is built (tests that need it are skipped otherwise).
    static var available: Bool { FileManager.default.isExecutableFile(atPath: binary) }

    let folder: URL
    let port: Int
    let process = Process()

    /// Where its standard error goes, with `keepingLog`.
    var logFile: URL { folder.appendingPathComponent("serve.log") }

    /// The database it serves.
    let database: String

    /// Starts `serve` with `options` after its port, database and key file; with `keepingLog`,
    /// its standard error goes to ``logFile``; with `database`, it serves that file (another
    /// process's) instead of a fresh one.
    init(_ options: [String], keepingLog: Bool = false, database: String? = nil) throws {
        folder = FileManager.default.temporaryDirectory.appendingPathComponent("serve-\(UUID())")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        port = Self.freePort()
        self.database = database ?? folder.appendingPathComponent("r.sqlite").path
        process.executableURL = URL(fileURLWithPath: Self.binary)
        process.arguments =
            [
                "serve", "--port", "\(port)", "--db", self.database,
                "--key-file", folder.appendingPathComponent("key.json").path, "--log-level", "warning",
            ] + options
        process.standardOutput = FileHandle.nullDevice
        if keepingLog {
            _ = FileManager.default.createFile(atPath: logFile.path, contents: nil)
            process.standardError = try FileHandle(forWritingTo: logFile)
        } else {
            process.standardError = FileHandle.nullDevice
        }
        try process.run()
    }

    deinit {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        try? FileManager.default.removeItem(at: folder)
    }

    /// What it has logged so far, with `keepingLog`.
    func log() -> String {
        (try? String(contentsOf: logFile, encoding: .utf8)) ?? ""
    }

    /// A raw connection to `port` (the plain HTTP one by default), once the server accepts them
    /// (it may still be starting).
    func connect(port: Int? = nil) async throws -> RawConnection {
        for _ in 0..<100 {
            if let connection = try? RawConnection(port: port ?? self.port) { return connection }
            try await Task.sleep(for: .milliseconds(100))
        }
        throw POSIXError(.ECONNREFUSED)
    }

    /// A value of `/metrics` (the line starting with `name`, labels included), read over a
    /// connection of its own.
    func metric(_ name: String) async throws -> Int? {
        let client = try await connect()
        await client.send("GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        return await client.readUntilClosed().text.split(separator: "\n")
            .first { $0.hasPrefix(name + " ") }
            .flatMap { Int($0.split(separator: " ").last ?? "") }
    }

    /// The server key `serve` wrote to its key file.
    func key() async throws -> String {
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

    /// Sends SIGTERM and waits up to `seconds` for the process to end; whether it did.
    @discardableResult
    func terminate(waiting seconds: Int) async throws -> Bool {
        kill(process.processIdentifier, SIGTERM)
        for _ in 0..<(seconds * 10) where process.isRunning { try await Task.sleep(for: .milliseconds(100)) }
        return !process.isRunning
    }

    static func freePort() -> Int {
        unusedLoopbackPort()
    }
}
