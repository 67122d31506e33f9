import Crypto
import Foundation

/// The audience index saved to a file, with the feed cursor it reflects, so that a restart loads
/// one compact file instead of reading every subscription row (22 s at 10M tokens and 50M
/// subscriptions), then replays the feed after that cursor.
///
/// The file is written whole to a temporary name of the writing process's own, flushed to disk
/// and renamed over the old one, so a crash leaves either the old checkpoint or the new one, and
/// several processes on one database never write into each other's file. A file that is
/// missing, damaged (its SHA-256 does not match), written for another database, ahead of the
/// database's feed, from another copy of the database (the feed entry at its cursor is not the
/// one it saw), or older than what the feed still holds is not used: the index is loaded from
/// the tables instead.
///
/// Format, little-endian: the magic `FCMRAUD3`; 16 bytes of database id; the cursor's watermark
/// (Int64), the count of ids seen above it (UInt32) and those ids (Int64 each); the fingerprint of
/// the feed entry at the watermark (32 bytes, zeros for none); the project count (UInt32); per
/// project its row id (Int64), its registered tokens (a serialized `RoaringBitmap`), its topic
/// count (UInt32) and per topic the name's length (UInt32), the name's UTF-8 and its members (a
/// serialized `RoaringBitmap`); its token attributes: for platforms, locales, time zones and app
/// versions in turn the value count (UInt32) and per value its name as a topic's and its tokens,
/// then the 16 last-seen day slices (`DaySlices`), each a serialized `RoaringBitmap`, and the
/// highest day set (UInt32); then the SHA-256 of all that. The bitmaps' format has a version
/// of its own, which in-memory tuning does not change.
public enum AudienceCheckpoint {
    static let magic = Array("FCMRAUD4".utf8)
    /// Earlier formats' magic: `FCMRAUD1` and `FCMRAUD2` held a single feed position,
    /// `FCMRAUD3` no token attributes.
    static let formerMagic = [Array("FCMRAUD1".utf8), Array("FCMRAUD2".utf8), Array("FCMRAUD3".utf8)]

    /// What a checkpoint holds.
    public struct Contents: Sendable {
        public var state: AudienceIndex.State
        /// The fingerprint of the feed entry at the cursor's watermark when it was saved.
        public var fingerprint: [UInt8]

        public init(state: AudienceIndex.State, fingerprint: [UInt8]) {
            self.state = state
            self.fingerprint = fingerprint
        }
    }

    /// Bytes of a fingerprint.
    public static let fingerprintSize = 32

    /// Why a checkpoint was not used.
    public enum Problem: Error, Sendable, CustomStringConvertible {
        case missing
        case damaged(String)
        case otherDatabase
        /// Written by an earlier version of the server, in a format this one does not read.
        case olderFormat
        /// The feed no longer holds the entries after the checkpoint's position.
        case stale(position: Int64)
        /// The database's feed ends before the checkpoint's cursor: a backup restored over the
        /// database the checkpoint was saved from.
        case ahead(position: Int64, head: Int64)
        /// The feed entry at the checkpoint's cursor is not the one it saw: another copy of the
        /// database, which went its own way after the copy was made.
        case otherCopy(position: Int64)

        public var description: String {
            switch self {
            case .missing: "no checkpoint file"
            case .damaged(let why): "the checkpoint file is damaged: \(why)"
            case .otherDatabase: "the checkpoint was written for another database"
            case .olderFormat: "the checkpoint was written in an older format"
            case .stale(let position): "the checkpoint (feed position \(position)) is older than the feed keeps"
            case .ahead(let position, let head):
                "the checkpoint (feed position \(position)) is ahead of the database (feed at \(head)): was a backup restored?"
            case .otherCopy(let position):
                "the checkpoint (feed position \(position)) was saved from another copy of the database"
            }
        }
    }

    /// The bytes of a checkpoint.
    public static func encode(_ contents: Contents, databaseID: [UInt8]) -> [UInt8] {
        let state = contents.state
        var bytes = magic + databaseID
        append(state.cursor.watermark, to: &bytes)
        append(UInt32(state.cursor.seenAbove.count), to: &bytes)
        for id in state.cursor.seenAbove { append(id, to: &bytes) }
        bytes += contents.fingerprint.prefix(fingerprintSize)
        bytes += [UInt8](repeating: 0, count: fingerprintSize - min(fingerprintSize, contents.fingerprint.count))
        append(UInt32(state.projects.count), to: &bytes)
        for (project, snapshot) in state.projects.sorted(by: { $0.key < $1.key }) {
            append(project, to: &bytes)
            snapshot.registered.serialize(into: &bytes)
            append(UInt32(snapshot.topics.count), to: &bytes)
            for (name, members) in snapshot.topics {
                append(name, to: &bytes)
                members.bitmap.serialize(into: &bytes)
            }
            for bitmaps in snapshot.attributes.namedBitmaps {
                append(UInt32(bitmaps.count), to: &bytes)
                for (name, bitmap) in bitmaps {
                    append(name, to: &bytes)
                    bitmap.serialize(into: &bytes)
                }
            }
            for slice in snapshot.attributes.seen.slices { slice.serialize(into: &bytes) }
            append(UInt32(snapshot.attributes.seen.highest), to: &bytes)
        }
        bytes += SHA256.hash(data: bytes)
        return bytes
    }

    /// Reads a checkpoint's bytes back.
    public static func decode(_ bytes: [UInt8], databaseID: [UInt8]) throws(Problem) -> Contents {
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
        var fingerprint: [UInt8] = []
        do {
            let watermark = Int64(bitPattern: try read(UInt64.self, &reader))
            let seen = Int(try read(UInt32.self, &reader))
            guard seen <= reader.count / 8 else { throw Problem.damaged("seen ids past the end") }
            var seenAbove: [Int64] = []
            for _ in 0..<seen { seenAbove.append(Int64(bitPattern: try read(UInt64.self, &reader))) }
            state.cursor = FeedCursor(watermark: watermark, seenAbove: seenAbove)
            guard reader.count >= fingerprintSize else { throw Problem.damaged("truncated") }
            fingerprint = Array(reader.prefix(fingerprintSize))
            reader = reader.dropFirst(fingerprintSize)
            let projects = try read(UInt32.self, &reader)
            for _ in 0..<projects {
                let project = Int64(bitPattern: try read(UInt64.self, &reader))
                var snapshot = AudienceIndex.Snapshot()
                snapshot.registered = try RoaringBitmap(deserializing: &reader)
                let topics = try read(UInt32.self, &reader)
                for _ in 0..<topics {
                    let name = try readName(&reader)
                    snapshot.topics[name] = TopicMembers(try RoaringBitmap(deserializing: &reader))
                }
                var named = snapshot.attributes.namedBitmaps
                for attribute in named.indices {
                    for _ in 0..<(try read(UInt32.self, &reader)) {
                        let name = try readName(&reader)
                        named[attribute][name] = try RoaringBitmap(deserializing: &reader)
                    }
                }
                snapshot.attributes.namedBitmaps = named
                for bit in 0..<DaySlices.bits {
                    snapshot.attributes.seen.slices[bit] = try RoaringBitmap(deserializing: &reader)
                }
                snapshot.attributes.seen.highest = Int32(clamping: try read(UInt32.self, &reader))
                state.projects[project] = snapshot
            }
        } catch let problem as Problem {
            throw problem
        } catch {
            throw .damaged("\(error)")
        }
        guard reader.isEmpty else { throw .damaged("bytes after the last project") }
        return Contents(state: state, fingerprint: fingerprint)
    }

    /// Writes `bytes` to `path` atomically: a temporary file of this write's own, flushed,
    /// renamed over the old one. Two processes saving at once each rename a whole file of their
    /// own; the last one stays.
    public static func write(_ bytes: [UInt8], to path: String) throws {
        let temporary = path + ".tmp-\(getpid())-\(UInt32.random(in: .min ... .max))"
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

    // MARK: - Integers and names

    /// A name (a topic, an attribute's value): its UTF-8 length (UInt32), then its UTF-8.
    private static func append(_ name: String, to bytes: inout [UInt8]) {
        let utf8 = Array(name.utf8)
        append(UInt32(utf8.count), to: &bytes)
        bytes += utf8
    }

    private static func readName(_ reader: inout ArraySlice<UInt8>) throws(Problem) -> String {
        let length = Int(try read(UInt32.self, &reader))
        guard length <= reader.count else { throw .damaged("a name past the end") }
        let name = String(decoding: reader.prefix(length), as: UTF8.self)
        reader = reader.dropFirst(length)
        return name
    }

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
