import Foundation
import Registry
import Testing

@Suite("import-groups CSV rows")
struct GoogleGroupsCSVTests {
    static let key = "APA91bGHXQBB-ImportedFromGoogle_bfD2hB0DxDpo"

    private func group(_ row: String) throws -> GroupArchive? {
        var rows = GoogleGroupsCSV(project: "p")
        guard case .group(let group) = try rows.record(from: Array(row.utf8)) else { return nil }
        return group
    }

    @Test("A row is a group of one member with Google's key")
    func row() throws {
        let group = try #require(try group("appUser-Chris,\(Self.key),\(token(1))\r"))
        #expect(group.name == "appUser-Chris")
        #expect(group.members.map(\.token) == [token(1)])
        #expect(group.notificationKeys == [Self.key])
        #expect(group.project == "p")
    }

    @Test(
        "Quoted fields as RFC 4180 writes them",
        arguments: [
            (#""a,b",KEY,T"#, "a,b"),
            (#""say ""hi""",KEY,T"#, #"say "hi""#),
            (#"  spaced name  ,KEY,T"#, "spaced name"),
            ("\u{FEFF}bom,KEY,T", "bom"),
        ])
    func quoting(row: String, name: String) throws {
        let line = row.replacingOccurrences(of: "KEY", with: Self.key).replacingOccurrences(of: "T", with: token(1))
        #expect(try group(line)?.name == name)
    }

    @Test("The header row is skipped, only as the first row; blank rows are skipped")
    func header() throws {
        var rows = GoogleGroupsCSV(project: "p")
        #expect(try rows.record(from: Array("notification_key_name,notification_key,registration_token".utf8)) == nil)
        #expect(try rows.record(from: Array("   ".utf8)) == nil)
        #expect(throws: ArchiveProblem.self) {
            try rows.record(from: Array("notification_key_name,notification_key,registration_token".utf8))
        }
    }

    @Test(
        "Bad rows say what is wrong",
        arguments: [
            ("a,b", "expected 3 fields"),
            ("g,notakey,\(token(1))", "is not a notification key as Google issues them"),
            (#""open,\#(key),t"#, "a quoted field is not closed"),
            (#""g"x,\#(key),t"#, "text after a closing quote"),
        ])
    func badRows(row: String, problem: String) {
        var rows = GoogleGroupsCSV(project: "p")
        #expect {
            try rows.record(from: Array(row.utf8))
        } throws: { error in
            (error as? ArchiveProblem)?.message.contains(problem) == true
        }
    }

    @Test(
        "A row separated by ';' or tabs is told that fields are separated by commas",
        arguments: [(";", "this line uses ';'"), ("\t", "this line uses tabs")])
    func otherSeparator(separator: String, hint: String) {
        var rows = GoogleGroupsCSV(project: "p")
        let row = ["appUser-Chris", Self.key, token(1)].joined(separator: separator)
        #expect {
            try rows.record(from: Array(row.utf8))
        } throws: { error in
            let message = (error as? ArchiveProblem)?.message ?? ""
            return message.contains("found 1") && message.contains("fields are separated by commas; \(hint)")
        }
    }

    @Test("A row with too few fields and no other separator gets no hint")
    func noHint() {
        var rows = GoogleGroupsCSV(project: "p")
        #expect {
            try rows.record(from: Array("a;b,c".utf8))
        } throws: { error in
            (error as? ArchiveProblem)?.message.contains("separated") == false
        }
    }

    @Test("Data rows are counted, good or bad; the header and blank rows are not")
    func dataRows() throws {
        var rows = GoogleGroupsCSV(project: "p")
        _ = try rows.record(from: Array("notification_key_name,notification_key,registration_token".utf8))
        _ = try rows.record(from: Array(" ".utf8))
        #expect(rows.dataRows == 0)
        _ = try rows.record(from: Array("g,\(Self.key),\(token(1))".utf8))
        _ = try? rows.record(from: Array("bad".utf8))
        #expect(rows.dataRows == 2)
    }
}
