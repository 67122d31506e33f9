import Foundation
import Hummingbird
import Registry
import TestBackends
import Testing

/// Groups brought from Google by `import-groups`: the notification keys Google issued keep
/// working on every route that takes one.
@Suite("Google's notification keys after import-groups", .onEveryBackend)
struct ImportedGroupAPITests {
    /// A key as Google issues them (`APA91b` and about 140 characters).
    static let googleKey =
        "APA91bGHXQBB-ImportedFromGoogle_bfD2hB0DxDpo-6vnr1i0Ht5zB7UdTbxNcS4jxz2R4NIe3ajuF1QkC7fJfM9e1wTrcoAfSPbe6JcRRmzVNvMfeLzEf4KYdWCRXmXs"

    /// Imports the CSV rows, as the command does, into the fixture's project.
    private func importGroups(_ csv: String, into fixture: Fixture) async throws -> ImportTally {
        var session = ArchiveImport(into: fixture.registry, needsHeader: false, updatingAudience: true)
        var rows = GoogleGroupsCSV(project: fixture.project.projectId)
        for (index, line) in csv.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            try await session.take(row: Array(line.utf8), number: index + 1, of: &rows)
        }
        return try await session.finish()
    }

    private var csv: String {
        """
        notification_key_name,notification_key,registration_token
        appUser-Chris,\(Self.googleKey),\(token(1))
        "appUser-Chris", \(Self.googleKey) ,\(token(2))

        """
    }

    @Test("A send to Google's key reaches the imported group over /fcm/send")
    func send() async throws {
        let fixture = try await Fixture.make()
        let tally = try await importGroups(csv, into: fixture)
        #expect(tally.groups == 1 && tally.members == 2 && tally.notificationKeys == 1)
        try await fixture.test { client in
            let reply = try await client.call(.post, "/fcm/send", body: #"{"to":"\#(Self.googleKey)","data":{"a":"b"}}"#)
            #expect(reply.status == .ok)
            #expect(reply.json == ["success": 2, "failure": 0])
        }
    }

    @Test("add and remove by Google's key change the imported group; FCM's answer echoes that key")
    func addAndRemove() async throws {
        let fixture = try await Fixture.make()
        _ = try await importGroups(csv, into: fixture)
        try await fixture.test { client in
            let added = try await client.groups(
                #"{"operation":"add","notification_key_name":"appUser-Chris","notification_key":"\#(Self.googleKey)","registration_ids":["\#(token(3))"]}"#
            )
            #expect(added.status == .ok)
            #expect(added.json == ["notification_key": .string(Self.googleKey)])
            #expect(try await fixture.registry.store.group(named: "appUser-Chris", in: fixture.project)?.memberCount == 3)
            let removed = try await client.groups(
                #"{"operation":"remove","notification_key":"\#(Self.googleKey)","registration_ids":["\#(token(1))"]}"#)
            #expect(removed.status == .ok)
            #expect(try await fixture.registry.store.group(named: "appUser-Chris", in: fixture.project)?.memberCount == 2)
            // A key of Google's that was not imported is still unknown.
            let unknown = try await client.call(
                .post, "/fcm/send", body: #"{"to":"\#(Self.googleKey.dropLast(4))QQQQ","data":{"a":"b"}}"#)
            #expect(unknown.json?["failure"] == 1)
        }
    }

    @Test("Importing the same CSV again changes nothing; one Google key cannot name two groups")
    func idempotent() async throws {
        let fixture = try await Fixture.make()
        _ = try await importGroups(csv, into: fixture)
        #expect(try await importGroups(csv, into: fixture) == ImportTally())
        await #expect(throws: ImportFailure.self) {
            try await importGroups("other,\(Self.googleKey),\(token(5))", into: fixture)
        }
        #expect(try await fixture.registry.store.group(named: "other", in: fixture.project) == nil)
    }

    @Test("A Google key outlives its group as FCM's keys do: it reaches no one, and add says not found")
    func keyOfADeletedGroup() async throws {
        let fixture = try await Fixture.make()
        _ = try await importGroups(csv, into: fixture)
        try await fixture.test { client in
            let removed = try await client.groups(
                #"{"operation":"remove","notification_key":"\#(Self.googleKey)","registration_ids":["\#(token(1))","\#(token(2))"]}"#)
            #expect(removed.status == .ok)
            #expect(try await fixture.registry.store.group(named: "appUser-Chris", in: fixture.project) == nil)
            let send = try await client.call(.post, "/fcm/send", body: #"{"to":"\#(Self.googleKey)","data":{"a":"b"}}"#)
            #expect(send.json?["success"] == 0)
            #expect(send.json?["error"] == "NotRegistered")
            let add = try await client.groups(
                #"{"operation":"add","notification_key":"\#(Self.googleKey)","registration_ids":["\#(token(3))"]}"#)
            #expect(add.json == ["error": "notification_key not found"])
        }
        // Importing the rows again brings the group back under the same key.
        _ = try await importGroups(csv, into: fixture)
        try await fixture.test { client in
            let send = try await client.call(.post, "/fcm/send", body: #"{"to":"\#(Self.googleKey)","data":{"a":"b"}}"#)
            #expect(send.json == ["success": 2, "failure": 0])
        }
    }
}
