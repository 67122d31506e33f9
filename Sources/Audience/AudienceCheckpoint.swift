import Crypto
import Foundation

/// The audience index saved to a file, with the feed position it reflects, so that a restart
/// loads one compact file instead of reading every subscription row (22 s at 10M tokens and
/// 50M subscriptions), then replays the feed from that position.
///
/// The file is written whole to a temporary name, flushed to disk and renamed over the old one,
/// so a crash leaves either the old checkpoint or the new one. A file that is missing, damaged
/// (its SHA-256 does not match), written for another database, or older than what the feed
/// still holds is not used: the index is loaded from the tables instead.
///
/// Format, little-endian: the magic `FCMRAUD2`; 16 bytes of database id; the feed position
/// (Int64); the project count (UInt32); per project its row id (Int64), its registered tokens (a
/// serialized `RoaringBitmap`), its topic count (UInt32) and per topic the name's length (UInt32),
/// the name's UTF-8 and its members (a serialized `RoaringBitmap`); then the SHA-256 of all that.
public enum AudienceCheckpoint {
    static let magic = Array("FCMRAUD2".utf8)
    /// Earlier formats' magic: `FCMRAUD1` held bitmaps whose arrays went up to 4,096 values.
    static let formerMagic = [Array("FCMRAUD1".utf8)]

    /// Why a checkpoint was not used.
    public enum Problem: Error, Sendable, CustomStringConvertible {
        case missing
        case damaged(String)
        case otherDatabase
        /// Written by an earlier version of the server, in a format this one does not read.
        case olderFormat
        /// The feed no longer holds the entries after the checkpoint's position.
        case stale(position: Int64)

        public var description: String {
            switch self {
            case .missing: "no checkpoint file"
            case .damaged(let why): "the checkpoint file is damaged: \(why)"
            case .otherDatabase: "the checkpoint was written for another database"
            case .olderFormat: "the checkpoint was written in an older format"
            case .stale(let position): "the checkpoint (feed position \(position)) is older than the feed keeps"
            }
        }
    }

    /// The bytes of a checkpoint of `state`.
    public static func encode(_ state: AudienceIndex.State, databaseID: [UInt8]) -> [UInt8] {
        var bytes = magic + databaseID
        append(state.position, to: &bytes)
        append(UInt32(state.projects.count), to: &bytes)
        for (project, snapshot) in state.projects.sorted(by: { $0.key < $1.key }) {
            append(project, to: &bytes)
            snapshot.registered.serialize(into: &bytes)
            append(UInt32(snapshot.topics.count), to: &bytes)
            for (name, members) in snapshot.topics {
                let utf8 = Array(name.utf8)
                append(UInt32(utf8.count), to: &bytes)
                bytes += utf8
                members.bitmap.serialize(into: &bytes)
            }
        }
        bytes += SHA256.hash(data: bytes)
        return bytes
    }

    /// Reads a checkpoint's bytes back into index state.
    public static func decode(_ bytes: [UInt8], databaseID: [UInt8]) throws(Problem) -> AudienceIndex.State {
        let headerSize = magic.count + 16 + 8 + 4
        // The magic first: an earlier format's file is recognised whatever else it holds.
        let fileMagic = Array(bytes.prefix(magic.count))
        guard !formerMagic.contains(fileMagic) else { throw .olderFormat }
        guard bytes.count >= headerSize + SHA256.byteCount else { throw .damaged("too short") }
        guard fileMagic == magic else { throw .damaged("not a checkpoint file") }
        let body = bytes[..<(bytes.count - SHA256.byteCount)]
        guard Array(SHA256.hash(data: body)) == Array(bytes[(bytes.count - SHA256.byteCount)...]) else {
            throw .damaged("checksum mismatch")
        }
        guard Array(body.dropFirst(magic.count).prefix(16)) == databaseID else { throw .otherDatabase }
        var reader = body.dropFirst(magic.count + 16)
        var state = AudienceIndex.State()
        do {
            state.position = Int64(bitPattern: try read(UInt64.self, &reader))
            let projects = try read(UInt32.self, &reader)
            for _ in 0..<projects {
                let project = Int64(bitPattern: try read(UInt64.self, &reader))
                var snapshot = AudienceIndex.Snapshot()
                snapshot.registered = try RoaringBitmap(deserializing: &reader)
                let topics = try read(UInt32.self, &reader)
                for _ in 0..<topics {
                    let length = Int(try read(UInt32.self, &reader))
                    guard length <= reader.count else { throw Problem.damaged("topic name past the end") }
                    let name = String(decoding: reader.prefix(length), as: UTF8.self)
                    reader = reader.dropFirst(length)
                    snapshot.topics[name] = TopicMembers(try RoaringBitmap(deserializing: &reader))
                }
                state.projects[project] = snapshot
            }
        } catch let problem as Problem {
            throw problem
        } catch {
            throw .damaged("\(error)")
        }
        guard reader.isEmpty else { throw .damaged("bytes after the last project") }
        return state
    }

    /// Writes `bytes` to `path` atomically: a temporary file, flushed, renamed over the old one.
    public static func write(_ bytes: [UInt8], to path: String) throws {
        let temporary = path + ".tmp"
        _ = FileManager.default.createFile(atPath: temporary, contents: nil, attributes: [.posixPermissions: 0o600])
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: temporary))
        do {
            try handle.write(contentsOf: bytes)
            try handle.synchronize()
            try handle.close()
        } catch {
            try? handle.close()
            try? FileManager.default.removeItem(atPath: temporary)
            throw error
        }
        guard rename(temporary, path) == 0 else {
            try? FileManager.default.removeItem(atPath: temporary)
            throw CocoaError(.fileWriteUnknown)
        }
    }

    public static func read(from path: String) throws(Problem) -> [UInt8] {
        guard FileManager.default.fileExists(atPath: path) else { throw .missing }
        do {
            return [UInt8](try Data(contentsOf: URL(fileURLWithPath: path), options: .alwaysMapped))
        } catch {
            throw .damaged("cannot read it: \(error.localizedDescription)")
        }
    }

    // MARK: - Integers

    private static func append<T: FixedWidthInteger>(_ value: T, to bytes: inout [UInt8]) {
        withUnsafeBytes(of: value.littleEndian) { bytes.append(contentsOf: $0) }
    }

    private static func read<T: FixedWidthInteger>(_: T.Type, _ reader: inout ArraySlice<UInt8>) throws(Problem) -> T {
        let size = MemoryLayout<T>.size
        guard reader.count >= size else { throw .damaged("truncated") }
        var value = T.zero
        for (shift, byte) in reader.prefix(size).enumerated() { value |= T(byte) << (shift * 8) }
        reader = reader.dropFirst(size)
        return value
    }
}
