import FCMWire
import Foundation

#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif

/// A file for secrets (`project create --output`'s server key, `export --output`'s keyrings):
/// mode 0600 whatever the umask, and never over an existing file unless `replacing`. A
/// replacement is written beside the old file and renamed over it once complete, so that an
/// export that fails leaves the previous one whole. A symbolic link at the path is never followed.
final class PrivateFile {
    let path: String
    let descriptor: Int32
    /// Where a replacement is written until ``commit()``.
    private let partial: String?
    private var closed = false

    /// - Throws: `CommandFailure` when the file exists (and not `replacing`) or cannot be created.
    init(creating path: String, replacing: Bool) throws {
        self.path = path
        var isFolder: ObjCBool = false
        let exists = FileManager.default.fileExists(atPath: path, isDirectory: &isFolder)
        if exists, isFolder.boolValue { throw CommandFailure(CommandWording.isAFolder(path)) }
        partial = replacing && exists ? "\(path).partial-\(getpid())" : nil
        let descriptor = open(partial ?? path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            if errno == EEXIST, partial == nil { throw CommandFailure(CommandWording.fileExists(path)) }
            throw CommandFailure(CommandWording.cannotCreate(path, reason: String(cString: strerror(errno))))
        }
        // open's mode passes through the umask, which may take away more than group and others.
        fchmod(descriptor, 0o600)
        self.descriptor = descriptor
    }

    /// Writes `text` whole.
    func append(_ text: String) throws {
        let bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeBytes { write(descriptor, $0.baseAddress! + offset, bytes.count - offset) }
            if written < 0 {
                if errno == EINTR { continue }
                throw CommandFailure(CommandWording.cannotWrite(path, reason: String(cString: strerror(errno))))
            }
            offset += written
        }
    }

    /// Makes the file durable and, for a replacement, puts it in the old one's place.
    func commit() throws {
        guard fsync(descriptor) == 0 else {
            throw CommandFailure(CommandWording.cannotWrite(path, reason: String(cString: strerror(errno))))
        }
        closed = true
        close(descriptor)
        if let partial, rename(partial, path) != 0 {
            throw CommandFailure(CommandWording.cannotReplace(path, reason: String(cString: strerror(errno))))
        }
    }

    /// Removes what was written: the command failed.
    func discard() {
        if !closed { close(descriptor) }
        closed = true
        unlink(partial ?? path)
    }
}
