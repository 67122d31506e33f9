import Foundation

/// The CSV that `import-groups` reads: one row per member of a device group, as a team reads
/// them from Google's device-group GET before device groups are turned down:
///
/// ```
/// notification_key_name,notification_key,registration_token
/// appUser-Chris,APA91bGHXQBB…,bk3RNwTe3H0:CI2k_HHwgIpoDKCIZvvDMExUdFQ3P1…
/// ```
///
/// The header row is optional; fields may be quoted as RFC 4180 says (`"a,b"`, `""` for `"`).
/// Each row becomes a group record with one member and Google's key, which the import merges
/// by the group's name: a group's rows need not be adjacent.
public struct GoogleGroupsCSV {
    public static let columns = ["notification_key_name", "notification_key", "registration_token"]
    /// The longest row read: three fields of a few hundred bytes, with room to spare.
    public static let maximumRowBytes = 16 << 10
    public static let rowTooLong = ArchiveProblem("the row is longer than 16 KiB")

    private let project: String
    private let importedAt: Date
    private var sawFirstRow = false
    /// Rows read that are neither blank nor the header, good or bad: a file without one is
    /// refused, since an import of nothing looks like a success.
    public private(set) var dataRows = 0

    public init(project: String, importedAt: Date = .now) {
        self.project = project
        self.importedAt = importedAt
    }

    /// The group record a row stands for; `nil` for the header row and blank lines.
    /// - Throws: `ArchiveProblem` saying what is wrong with the row.
    public mutating func record(from line: some Collection<UInt8>) throws(ArchiveProblem) -> ArchiveRecord? {
        guard line.count <= Self.maximumRowBytes else { throw Self.rowTooLong }
        guard let text = String(validating: line, as: UTF8.self) else { throw ArchiveProblem("the row is not UTF-8") }
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !trimmed.isEmpty else { return nil }
        let first = !sawFirstRow
        sawFirstRow = true
        let fields = try Self.fields(of: trimmed.hasPrefix("\u{FEFF}") ? String(trimmed.dropFirst()) : trimmed)
        if first, fields.map({ $0.lowercased() }) == Self.columns { return nil }
        dataRows += 1
        guard fields.count == 3 else {
            var problem = "expected 3 fields (\(Self.columns.joined(separator: ","))), found \(fields.count)"
            if let separator = Self.otherSeparator(in: trimmed) {
                problem += "; fields are separated by commas; this line uses \(separator)"
            }
            throw ArchiveProblem(problem)
        }
        let (name, key, token) = (fields[0], fields[1], fields[2])
        guard NotificationKeyCodec.isImportable(key) else {
            throw ArchiveProblem(
                "\(ArchiveRecord.quoted(key)) is not a notification key as Google issues them (APA91b…, under 512 characters of [A-Za-z0-9_:.-])"
            )
        }
        return .group(
            GroupArchive(
                project: project, name: name, createdAt: importedAt,
                members: [GroupArchive.Member(token: token, since: importedAt)], keyringIds: [],
                notificationKeys: [key]))
    }

    /// The separator a row seems to use instead of commas (a spreadsheet's export in a locale
    /// whose decimal mark is the comma writes `;`), as a diagnostic names it: the row splits into
    /// exactly the three fields there.
    static func otherSeparator(in row: String) -> String? {
        for (separator, name) in [(";", "';'"), ("\t", "tabs")] {
            let fields = row.split(separator: Character(separator), omittingEmptySubsequences: false)
            if fields.count == columns.count { return name }
        }
        return nil
    }

    /// The fields of one row: split at commas outside quotes, each trimmed of spaces, quotes
    /// removed and `""` read as `"`.
    static func fields(of row: String) throws(ArchiveProblem) -> [String] {
        var fields: [String] = []
        var field = ""
        var quoted = false
        var wasQuoted = false
        /// The unquoted field holds more than spaces: a quote in it is a character, not an opening.
        var fieldHasText = false
        var characters = row.makeIterator()
        while let character = characters.next() {
            if quoted {
                if character == "\"" {
                    var lookahead = characters
                    if lookahead.next() == "\"" {
                        field.append("\"")
                        characters = lookahead
                    } else {
                        quoted = false
                    }
                } else {
                    field.append(character)
                }
            } else if character == "," {
                fields.append(wasQuoted ? field : field.trimmingCharacters(in: .whitespaces))
                field = ""
                wasQuoted = false
                fieldHasText = false
            } else if character == "\"", !fieldHasText, !wasQuoted {
                field = ""
                quoted = true
                wasQuoted = true
            } else if wasQuoted, !character.isWhitespace {
                throw ArchiveProblem("text after a closing quote; write \"\" for a quote inside a quoted field")
            } else if !wasQuoted {
                field.append(character)
                if !character.isWhitespace { fieldHasText = true }
            }
        }
        guard !quoted else { throw ArchiveProblem("a quoted field is not closed before the end of the row") }
        fields.append(wasQuoted ? field : field.trimmingCharacters(in: .whitespaces))
        return fields
    }
}
