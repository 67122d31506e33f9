import FCMWire
import Synchronization

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Standard output in 1 MiB writes, safe to hand to the registry's export callback.
final class OutputBuffer: Sendable {
    private let state = Mutex<[UInt8]>([])
    private let descriptor: Int32
    private static let flushAt = 1 << 20

    init(descriptor: Int32 = STDOUT_FILENO) {
        self.descriptor = descriptor
    }

    /// Appends one line; writes the buffer out when it is full.
    func writeLine(_ bytes: [UInt8]) throws {
        try state.withLock { buffer in
            buffer.append(contentsOf: bytes)
            buffer.append(0x0A)
            if buffer.count >= Self.flushAt { try Self.drain(&buffer, to: descriptor) }
        }
    }

    func flush() throws {
        try state.withLock { buffer in try Self.drain(&buffer, to: descriptor) }
    }

    private static func drain(_ buffer: inout [UInt8], to descriptor: Int32) throws {
        var offset = 0
        while offset < buffer.count {
            let written = buffer.withUnsafeBytes { bytes in
                write(descriptor, bytes.baseAddress! + offset, bytes.count - offset)
            }
            if written < 0 {
                if errno == EINTR { continue }
                throw WriteError(message: String(cString: strerror(errno)))
            }
            offset += written
        }
        buffer.removeAll(keepingCapacity: true)
    }

    struct WriteError: Error, CustomStringConvertible {
        var message: String
        var description: String { CommandWording.cannotWriteOutput(message) }
    }
}
