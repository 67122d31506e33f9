import Foundation

/// Reads and writes the lines of an export file: one JSON object per line, `"type"` first, times
/// in RFC 3339 with milliseconds (the precision the registry keeps).
public struct ArchiveLineCoder: Sendable {
    /// The longest line `import` reads under `limits`: at least 4 MiB, and room for a token with
    /// as many topics of 900 characters as a token may have, or a group with as many members of
    /// 4,096 characters as a group may have.
    public static func maximumLineBytes(for limits: Limits) -> Int {
        max(4 << 20, limits.topicsPerToken * 1_024 + (64 << 10), limits.membersPerGroup * 4_200 + (64 << 10))
    }

    /// The longest line this coder decodes.
    public let maximumLineBytes: Int

    private let encoder: JSONEncoder
    private let decoder: JSONDecoder

    public init(limits: Limits = Limits()) {
        maximumLineBytes = Self.maximumLineBytes(for: limits)
        encoder = JSONEncoder()
        encoder.outputFormatting = [.withoutEscapingSlashes, .sortedKeys]
        encoder.dateEncodingStrategy = .custom { date, encoder in
            var container = encoder.singleValueContainer()
            try container.encode(EpochMilliseconds.rfc3339(date))
        }
        decoder = JSONDecoder()
        decoder.dateDecodingStrategy = .custom { decoder in
            let container = try decoder.singleValueContainer()
            let text = try container.decode(String.self)
            guard let date = (try? Self.time.parse(text)) ?? (try? Date.ISO8601FormatStyle().parse(text)) else {
                throw DecodingError.dataCorruptedError(
                    in: container, debugDescription: "not an RFC 3339 time, like 2026-11-24T14:05:00.000Z")
            }
            return date
        }
    }

    private static let time = Date.ISO8601FormatStyle(includingFractionalSeconds: true)

    /// The record as one line, without its newline.
    /// Keys are sorted, after `"type"`, so that two exports of the same registry are the same bytes.
    public func encode(_ record: ArchiveRecord) throws -> [UInt8] {
        let (kind, fields): (String, Data) =
            switch record {
            case .header(let value): ("header", try encoder.encode(value))
            case .project(let value): ("project", try encoder.encode(value))
            case .topic(let value): ("topic", try encoder.encode(value))
            case .token(let value): ("token", try encoder.encode(value))
            case .group(let value): ("group", try encoder.encode(value))
            }
        // `fields` is a JSON object with at least one member: `{` + `"type":…,` + the rest.
        return Array("{\"type\":\"\(kind)\",".utf8) + fields.dropFirst()
    }

    /// The record a line holds, as written; ``ArchiveRecord/validated(limits:)`` checks it.
    /// - Throws: `ArchiveProblem` saying what is wrong with the line.
    public func decode(_ line: some Collection<UInt8>) throws(ArchiveProblem) -> ArchiveRecord {
        guard line.count <= maximumLineBytes else {
            throw ArchiveProblem("the line is longer than \(maximumLineBytes >> 20) MiB")
        }
        do {
            return try decoder.decode(TypedRecord.self, from: Data(line)).record
        } catch let problem as ArchiveProblem {
            throw problem
        } catch let error as DecodingError {
            throw ArchiveProblem(Self.describe(error))
        } catch {
            throw ArchiveProblem("not a JSON object")
        }
    }

    /// A decoding error in a person's words: which field, and what was expected.
    private static func describe(_ error: DecodingError) -> String {
        func path(_ context: DecodingError.Context) -> String {
            context.codingPath.map { $0.intValue.map { "[\($0)]" } ?? ".\($0.stringValue)" }.joined()
                .trimmingCharacters(in: ["."])
        }
        switch error {
        case .keyNotFound(let key, let context):
            let owner = path(context)
            return "missing \"\(key.stringValue)\"" + (owner.isEmpty ? "" : " in \(owner)")
        case .typeMismatch(let type, let context), .valueNotFound(let type, let context):
            return "\(path(context)) must be \(Self.name(of: type))"
        case .dataCorrupted(let context):
            let field = path(context)
            return field.isEmpty ? "not a JSON object" : "\(field): \(context.debugDescription)"
        @unknown default:
            return "not a record of an export file"
        }
    }

    private static func name(of type: Any.Type) -> String {
        switch type {
        case is String.Type: "a string"
        case is Int.Type, is Int64.Type: "an integer"
        case is Bool.Type: "true or false"
        case is [Any].Type: "an array"
        default: "an object"
        }
    }
}

/// What is wrong with one line of an import, in a person's words; `import` prefixes the line number.
public struct ArchiveProblem: Error, Sendable, Hashable, CustomStringConvertible {
    public var message: String

    public init(_ message: String) {
        self.message = message
    }

    public var description: String { message }
}

/// A record with its line number, as `import` hands batches to the registry.
public struct NumberedRecord: Sendable, Hashable {
    public var line: Int
    public var record: ArchiveRecord

    public init(line: Int, record: ArchiveRecord) {
        self.line = line
        self.record = record
    }
}

/// Why an import stopped: the line, and what is wrong with it. Nothing of the batch that holds
/// the line was written; the batches before it were.
public struct ImportError: Error, Sendable, Hashable, CustomStringConvertible {
    public var line: Int
    public var problem: String

    public init(line: Int, problem: String) {
        self.line = line
        self.problem = problem
    }

    public var description: String { "line \(line): \(problem)" }
}

/// Reads `{"type": "token", …}`: the record's kind, then its fields.
private struct TypedRecord: Decodable {
    var record: ArchiveRecord

    private enum Kind: String {
        case header, project, topic, token, group
    }

    private enum CodingKeys: String, CodingKey {
        case type
    }

    init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        let type = try container.decode(String.self, forKey: .type)
        guard let kind = Kind(rawValue: type) else {
            throw ArchiveProblem("unknown record type \"\(type)\" (header, project, topic, token or group)")
        }
        switch kind {
        case .header: record = .header(try ArchiveHeader(from: decoder))
        case .project: record = .project(try ProjectArchive(from: decoder))
        case .topic: record = .topic(try TopicArchive(from: decoder))
        case .token: record = .token(try TokenArchive(from: decoder))
        case .group: record = .group(try GroupArchive(from: decoder))
        }
    }
}
