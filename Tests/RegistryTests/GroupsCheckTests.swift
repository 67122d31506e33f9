import Foundation
import Registry
import TestBackends
import Testing

/// `import-groups --check` against the import itself, for a CSV whose groups cross a batch.
@Suite("import-groups --check counts as the import adds", .onEveryBackend)
struct GroupsCheckTests {
    /// One group per row up to the batch's last row, then one group whose rows straddle the
    /// boundary, then one more.
    static func rows() -> [String] {
        var rows = (0..<(ArchiveImport.batchSize - 1)).map { "g\($0),APA91bKey\($0),\(token($0))" }
        rows += (0..<3).map { "split,APA91bSplitKey,\(token(10_000 + $0))" }
        rows.append("after,APA91bAfterKey,\(token(20_000))")
        return rows
    }

    static func run(_ rows: [String], into registry: RegistryService, checkingOnly: Bool) async throws -> ImportTally {
        var session = ArchiveImport(into: registry, needsHeader: false, checkingOnly: checkingOnly)
        var csv = GoogleGroupsCSV(project: "p")
        for (index, row) in rows.enumerated() {
            try await session.take(row: Array(row.utf8), number: index + 1, of: &csv)
        }
        return try await session.finish()
    }

    @Test("A group whose rows straddle a 1,000-row batch is counted once, as the import adds it")
    func straddlingGroup() async throws {
        let registry = try await RegistryService(store: TestBackend.makeStore())
        _ = try await registry.createProject(projectId: "p", senderId: "123456789012")
        let rows = Self.rows()
        let checked = try await Self.run(rows, into: registry, checkingOnly: true)
        #expect(checked.groups == ArchiveImport.batchSize + 1)
        #expect(checked.notificationKeys == ArchiveImport.batchSize + 1)
        let added = try await Self.run(rows, into: registry, checkingOnly: false)
        #expect(checked == added)
        #expect(added.members == rows.count)
    }
}
