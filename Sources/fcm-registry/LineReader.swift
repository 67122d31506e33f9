import FCMWire

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// Reads a file descriptor line by line in 64 KiB reads, keeping at most one line in memory: a
/// line longer than `maximumLineBytes` is skipped to its end and reported as too long, so that a
/// file without newlines cannot fill memory.
struct LineReader {
    enum Line {
        case text(ArraySlice<UInt8>)
        case tooLong
    }

    private let descriptor: Int32
    private let maximumLineBytes: Int
    private var buffer: [UInt8] = []
    private var start = 0
    /// Where the search for the next newline goes on: bytes before it hold none.
    private var scanned = 0
    private var atEnd = false
    private var skipping = false
    /// Bytes read so far, for progress.
    private(set) var bytesRead = 0
    /// The number of the line `next()` returned last, from 1.
    private(set) var lineNumber = 0

    init(descriptor: Int32, maximumLineBytes: Int) {
        self.descriptor = descriptor
        self.maximumLineBytes = maximumLineBytes
    }

    /// The next line without its newline, or `nil` at the end of the input.
    mutating func next() throws(ReadError) -> Line? {
        while true {
            if let newline = buffer[max(start, scanned)...].firstIndex(of: 0x0A) {
                let line = buffer[start..<newline]
                start = newline + 1
                scanned = start
                lineNumber += 1
                if skipping {
                    skipping = false
                    return .tooLong
                }
                return .text(line)
            }
            if buffer.count - start > maximumLineBytes {
                // Keep nothing of an overlong line; report it once its newline arrives.
                skipping = true
                buffer.removeAll(keepingCapacity: true)
                start = 0
                scanned = 0
            }
            if atEnd {
                guard start < buffer.count || skipping else { return nil }
                lineNumber += 1
                let line = buffer[start...]
                start = buffer.count
                scanned = start
                if skipping {
                    skipping = false
                    return .tooLong
                }
                return .text(line)
            }
            try fill()
        }
    }

    private mutating func fill() throws(ReadError) {
        scanned = buffer.count
        if start > 0 {
            buffer.removeFirst(start)
            scanned -= start
            start = 0
        }
        let chunk = 64 << 10
        let old = buffer.count
        buffer.append(contentsOf: repeatElement(0, count: chunk))
        var count: Int
        repeat {
            count = buffer.withUnsafeMutableBytes { read(descriptor, $0.baseAddress! + old, chunk) }
        } while count < 0 && errno == EINTR
        guard count >= 0 else {
            buffer.removeLast(chunk)
            throw ReadError(message: String(cString: strerror(errno)))
        }
        buffer.removeLast(chunk - count)
        bytesRead += count
        if count == 0 { atEnd = true }
    }

    struct ReadError: Error, CustomStringConvertible {
        var message: String
        var description: String { CommandWording.cannotReadInput(message) }
    }
}
