import Conditions
import Foundation
import Registry
import Synchronization
import TestBackends
import Testing

@Suite("Export and import", .onEveryBackend)
struct ArchiveTests {
    /// A registry with a bit of everything: topics, tokens in both states, groups, a revoked key.
    private func sourceRegistry() async throws -> (RegistryService, Project, groupKey: String) {
        let (registry, project) = try await makeRegistry()
        for n in 1...30 {
            _ = try await registry.subscribe([token(n)], to: "news", in: project)
            if n % 3 == 0 { _ = try await registry.subscribe([token(n)], to: "weather", in: project) }
        }
        _ = try await registry.subscribe([token(40)], to: "sports", in: project)
        _ = try await registry.unregisterToken(token(7), in: project)
        // What tokens say of their devices, and an app server's own last-seen time.
        var described = TokenAttributeChange()
        described.platform = .set(.ios)
        described.locale = .set("fr-CA")
        described.timeZone = .set("Europe/Paris")
        described.appVersion = .set("5.12.0")
        described.lastSeenAt = Date(timeIntervalSince1970: 1_780_000_000)
        _ = try await registry.registerToken(token(5), change: described, in: project)
        var web = TokenAttributeChange()
        web.platform = .set(.web)
        _ = try await registry.registerToken(token(41), change: web, in: project)
        let key = try await registry.createGroup(named: "appUser-Chris", tokens: [token(1), token(2)], in: project)
        _ = try await registry.createGroup(named: "Crème", tokens: [token(3)], in: project)
        let (_, extra) = try await registry.addServerKey(toProject: project.projectId)
        try await registry.revokeServerKey(extra)
        return (registry, project, key)
    }

    private func exportLines(_ registry: RegistryService, project: String? = nil) async throws -> [String] {
        let lines = Mutex<[String]>([])
        let coder = ArchiveLineCoder()
        try await registry.export(project: project, producer: "tests") { record in
            let line = String(decoding: try coder.encode(record), as: UTF8.self)
            lines.withLock { $0.append(line) }
        }
        return lines.withLock { $0 }
    }

    @discardableResult
    private func importLines(
        _ lines: [String], into registry: RegistryService, updatingAudience: Bool = true, mergingCredentials: Bool = false
    ) async throws -> ImportTally {
        var session = ArchiveImport(
            into: registry, updatingAudience: updatingAudience, mergingCredentials: mergingCredentials)
        for (index, line) in lines.enumerated() {
            try await session.take(line: Array(line.utf8), number: index + 1)
        }
        return try await session.finish()
    }

    /// What a client sees of a registry: topics with their subscribers, tokens with their state
    /// and topics, groups with their members, audiences.
    private func answers(_ registry: RegistryService, _ project: Project) async throws -> [String] {
        var answers: [String] = []
        for topic in try await registry.topics(in: project, after: nil, limit: 100).items {
            let subscribers = try await registry.topicSubscribers(named: topic.name, in: project, after: nil, limit: 100)
            answers.append("topic \(topic) \(String(describing: subscribers?.1.items))")
        }
        for group in try await registry.groups(in: project, after: nil, limit: 100).items {
            let members = try await registry.groupMembers(named: group.name, in: project, after: nil, limit: 100)
            answers.append("group \(group) \(String(describing: members?.1.items))")
        }
        for n in 1...41 {
            let info = try await registry.token(token(n), in: project)
            let topics = try await registry.allSubscriptions(ofToken: token(n), in: project)
            let groups = try await registry.groups(ofToken: token(n), in: project)
            answers.append("token \(String(describing: info)) \(String(describing: topics)) \(groups)")
        }
        let reached = try await registry.resolve(
            .condition("'news' in topics && !('weather' in topics)", .v1), in: project, after: nil, pageSize: 100,
            countOnly: false)
        answers.append("condition \(reached.count) \(reached.tokens ?? [])")
        return answers
    }

    @Test("A registry exported and imported into an empty database answers every call as before")
    func roundTrip() async throws {
        let (source, project, key) = try await sourceRegistry()
        let lines = try await exportLines(source)
        let copy = try await RegistryService(store: TestBackend.makeStore())
        try await copy.startAudience()
        try await importLines(lines, into: copy)
        let imported = try #require(try await copy.projects().first { $0.projectId == project.projectId })
        #expect(try await answers(copy, imported) == answers(source, project))
        // The same bytes again, but for the header and the keyrings: the copy's own comes first,
        // and each group has an id under it besides its id under the source's.
        let again = try await exportLines(copy)
        #expect(again.count == lines.count)
        #expect(again.dropFirst(2).map(withoutKeyrings) == lines.dropFirst(2).map(withoutKeyrings))

        // The keys the source issued keep naming their groups, for sends and group operations.
        let members = try await copy.resolve(.notificationKey(key), in: imported, after: nil, pageSize: 10, countOnly: false)
        #expect(members.tokens == [token(1), token(2)])
        _ = try await copy.addToGroup(notificationKey: key, expectedName: "appUser-Chris", tokens: [token(9)], in: imported)
        #expect(try await copy.groupMembers(named: "appUser-Chris", in: imported, after: nil, limit: 10)?.1.items.count == 3)
    }

    private func withoutKeyrings(_ line: String) -> String {
        line.replacing(/"keyringIds":\[[^\]]*\],/, with: "")
    }

    @Test("Server keys come across as hashes: the source's key authenticates, a revoked one does not")
    func serverKeys() async throws {
        let registry = try await RegistryService(store: TestBackend.makeStore())
        let (project, key) = try await registry.createProject(projectId: "keys", senderId: "999")
        let (_, revoked) = try await registry.addServerKey(toProject: project.projectId)
        try await registry.revokeServerKey(revoked)
        let lines = try await exportLines(registry)
        #expect(!lines.joined().contains(key))
        let copy = try await RegistryService(store: TestBackend.makeStore())
        try await importLines(lines, into: copy)
        #expect(try await copy.project(authenticatedBy: key)?.projectId == "keys")
        #expect(try await copy.project(authenticatedBy: revoked) == nil)
    }

    @Test("A key keeps its name and scopes across, and a service account its scopes: a read key never comes back an admin one")
    func scopedKeys() async throws {
        let registry = try await RegistryService(store: TestBackend.makeStore())
        let (project, _) = try await registry.createProject(projectId: "keys", senderId: "999")
        let (_, _, read) = try await registry.addServerKey(toProject: project.projectId, name: "dashboard", scopes: .read)
        let copy = try await RegistryService(store: TestBackend.makeStore())
        try await importLines(try await exportLines(registry), into: copy)
        #expect(try await copy.grant(authenticatedBy: read)?.scopes == .read)
        let copied = try #require(try await copy.projects().first)
        #expect(try await copy.serverKeys(in: copied).map(\.name) == ["", "dashboard"])
        _ = try await registry.createServiceAccount(forProject: "keys", scopes: .send)
        let again = try await RegistryService(store: TestBackend.makeStore())
        try await importLines(try await exportLines(registry), into: again)
        let accounts = try await again.serviceAccounts(in: try #require(try await again.projects().first))
        #expect(accounts.map(\.scopes) == [.send])
    }

    @Test("Importing the same file twice writes nothing the second time")
    func idempotent() async throws {
        let (source, _, _) = try await sourceRegistry()
        let lines = try await exportLines(source)
        let copy = try await RegistryService(store: TestBackend.makeStore())
        let first = try await importLines(lines, into: copy)
        #expect(first.tokens == 32 && first.topics == 3 && first.groups == 2 && first.projects == 1)
        let before = try await exportLines(copy)
        let second = try await importLines(lines, into: copy)
        #expect(second == ImportTally())
        #expect(try await exportLines(copy).dropFirst() == before.dropFirst())
        // Into the database it came from: nothing new either.
        #expect(try await importLines(lines, into: source) == ImportTally())
    }

    private static let now = Date(timeIntervalSince1970: 1_790_000_000)

    /// An export file's lines: the header, project "p", then `records`.
    private func fileOfProjectP(_ records: [ArchiveRecord]) throws -> [String] {
        let coder = ArchiveLineCoder()
        let project = ProjectArchive(
            projectId: "p", senderId: "123", createdAt: Self.now, serverKeys: [], serviceAccounts: [], keyrings: [])
        return try ([.header(ArchiveHeader(exportedAt: Self.now, producer: nil)), .project(project)] + records).map {
            String(decoding: try coder.encode($0), as: UTF8.self)
        }
    }

    @Test("A bad line is refused with its number; nothing of its batch is written, the batches before it are")
    func badLineRefusesItsBatch() async throws {
        let registry = try await RegistryService(store: TestBackend.makeStore())
        let now = Self.now
        var lines = try fileOfProjectP(
            (1...1_500).map {
                .token(
                    TokenArchive(
                        project: "p", token: token($0), state: .registered, createdAt: now, updatedAt: now,
                        topics: [Joined(name: "t", since: now)]))
            })
        lines[1_200] = #"{"type":"token","project":"p","token":"not a token","#  // line 1,201
        lines[1_300] = lines[1_300].replacingOccurrences(of: "registered", with: "asleep")  // line 1,301
        var session = ArchiveImport(into: registry)
        var failure: ImportFailure?
        do {
            for (index, text) in lines.enumerated() { try await session.take(line: Array(text.utf8), number: index + 1) }
            _ = try await session.finish()
        } catch {
            failure = error
        }
        let refused = try #require(failure)
        #expect(refused.problems.map(\.line) == [1_201, 1_301])
        #expect(refused.problems[0].problem == "not a JSON object")
        #expect(refused.problems[1].problem.hasPrefix("state"))
        // The first batch (the project and 999 tokens) is written; the second, none of it.
        #expect(refused.written.tokens == 999)
        let project = try #require(try await registry.projects().first)
        #expect(try await registry.token(token(999), in: project) != nil)
        #expect(try await registry.token(token(1_000), in: project) == nil)
        #expect(try await registry.token(token(1_100), in: project) == nil)
    }

    @Test("The first line must be the header; a newer version is refused")
    func header() async throws {
        let registry = try await RegistryService(store: TestBackend.makeStore())
        for lines in [
            [#"{"type":"topic","project":"p","name":"t","createdAt":"2026-01-01T00:00:00.000Z"}"#],
            [#"{"type":"header","format":"fcm-registry-export","version":2,"exportedAt":"2026-01-01T00:00:00Z"}"#],
            [#"{"format":"fcm-registry-export"}"#],
            [],
        ] {
            await #expect(throws: ImportFailure.self) { try await importLines(lines, into: registry) }
        }
        #expect(try await registry.projects().isEmpty)
    }

    @Test("Limits hold on import: a group over the member limit, a token over the topic limit")
    func limits() async throws {
        var limits = Limits()
        limits.membersPerGroup = 3
        limits.topicsPerToken = 2
        let registry = try await RegistryService(store: TestBackend.makeStore(), limits: limits)
        let (source, _) = try await makeRegistry()
        let project = try #require(try await source.projects().first)
        _ = try await source.createGroup(named: "g", tokens: (1...4).map(token), in: project)
        for topic in ["a", "b", "c"] { _ = try await source.subscribe([token(9)], to: topic, in: project) }
        let lines = try await exportLines(source)
        await #expect(throws: ImportFailure.self) { try await importLines(lines, into: registry) }
        do {
            try await importLines(lines, into: registry)
        } catch let failure as ImportFailure {
            #expect(failure.problems.map(\.problem).contains { $0.contains("more than the 2 a token may have") })
            #expect(failure.problems.map(\.problem).contains { $0.contains("has 4 members; a group has 1 to 3") })
        }
        #expect(try await registry.projects().isEmpty)
    }

    /// An export of group "g" with two members, and a target where "g" already has two others,
    /// under a limit of three members.
    func groupOverLimitWhenMerged() async throws -> ([String], RegistryService, Project) {
        var limits = Limits()
        limits.membersPerGroup = 3
        let (source, project) = try await makeRegistry(limits: limits)
        _ = try await source.createGroup(named: "g", tokens: [token(1), token(2)], in: project)
        let lines = try await exportLines(source)
        let (target, targetProject) = try await makeRegistry(limits: limits)
        _ = try await target.createGroup(named: "g", tokens: [token(3), token(4)], in: targetProject)
        return (lines, target, targetProject)
    }

    @Test("A group's merge over the member limit with what is already here is refused whole")
    func mergeOverLimit() async throws {
        let (lines, target, targetProject) = try await groupOverLimitWhenMerged()
        await #expect {
            try await importLines(lines, into: target, mergingCredentials: true)
        } throws: { error in
            (error as? ImportFailure)?.problems.first?.problem.contains("more than 3 members") == true
        }
        #expect(try await target.groupMembers(named: "g", in: targetProject, after: nil, limit: 10)?.1.items.count == 2)
    }

    @Test("A checked import counts what it would add, as the import does, and writes nothing")
    func checkWritesNothing() async throws {
        let (source, _, _) = try await sourceRegistry()
        let lines = try await exportLines(source)
        let target = try await RegistryService(store: TestBackend.makeStore())
        var session = ArchiveImport(into: target, checkingOnly: true)
        for (index, line) in lines.enumerated() { try await session.take(line: Array(line.utf8), number: index + 1) }
        let checked = try await session.finish()
        #expect(try await target.projects().isEmpty)
        #expect(try await exportLines(target).count == 1)
        #expect(checked == (try await importLines(lines, into: target)))
    }

    @Test("A checked import stops where the import would, with the same words")
    func checkSaysWhatImportSays() async throws {
        let (lines, target, targetProject) = try await groupOverLimitWhenMerged()
        func failure(checking: Bool) async -> ImportFailure? {
            var session = ArchiveImport(into: target, mergingCredentials: true, checkingOnly: checking)
            do {
                for (index, line) in lines.enumerated() {
                    try await session.take(line: Array(line.utf8), number: index + 1)
                }
                _ = try await session.finish()
                return nil
            } catch {
                return error
            }
        }
        let checked = try #require(await failure(checking: true))
        #expect(checked.problems.first?.problem.contains("more than 3 members") == true)
        #expect(checked.description == (await failure(checking: false))?.description)
        #expect(try await target.groupMembers(named: "g", in: targetProject, after: nil, limit: 10)?.1.items.count == 2)
    }

    @Test("A token's attributes travel in its record; one a token could not hold is refused with its line")
    func attributesInRecords() async throws {
        let (source, _, _) = try await sourceRegistry()
        let lines = try await exportLines(source)
        let described = try #require(lines.first { $0.contains(token(5)) && $0.contains("\"type\":\"token\"") })
        let fields = [
            #""platform":"ios""#, #""locale":"fr-CA""#, #""timeZone":"Europe/Paris""#, #""appVersion":"5.12.0""#,
            #""lastSeenAt":"#,
        ]
        for field in fields {
            #expect(described.contains(field), "\(field) in \(described)")
        }
        let bad = lines.map { $0 == described ? $0.replacingOccurrences(of: "5.12.0", with: "5.x") : $0 }
        let target = try await RegistryService(store: TestBackend.makeStore())
        var session = ArchiveImport(into: target)
        await #expect {
            for (index, line) in bad.enumerated() { try await session.take(line: Array(line.utf8), number: index + 1) }
            _ = try await session.finish()
        } throws: { error in
            let problem = (error as? ImportFailure)?.problems.first
            return problem?.line == bad.firstIndex(of: described.replacingOccurrences(of: "5.12.0", with: "5.x"))! + 1
                && problem?.problem.contains("appVersion") == true
        }
    }

    @Test("An export's size is counted in advance, its header included")
    func exportSize() async throws {
        let (source, project, _) = try await sourceRegistry()
        #expect(try await source.exportSize(project: nil) == (try await exportLines(source)).count)
        #expect(
            try await source.exportSize(project: project.projectId)
                == (try await exportLines(source, project: project.projectId)).count)
        #expect(try await source.exportSize(project: "none") == 1)
    }

    @Test("Times come back to the millisecond")
    func times() throws {
        let coder = ArchiveLineCoder()
        for milliseconds in [0, 352, 1_764_000_000_352, 1_764_000_000_999, -1] as [Int64] {
            let date = Date(timeIntervalSince1970: Double(milliseconds) / 1000)
            let record = ArchiveRecord.topic(TopicArchive(project: "p", name: "t", createdAt: date))
            guard case .topic(let back) = try coder.decode(coder.encode(record)) else {
                Issue.record("not a topic")
                return
            }
            #expect(Int64((back.createdAt.timeIntervalSince1970 * 1000).rounded()) == milliseconds)
        }
    }

    @Test("A file may not add keys to a project already here, unless told to")
    func credentialsOfAProjectAlreadyHere() async throws {
        let source = try await RegistryService(store: TestBackend.makeStore())
        let (project, keyOfTheFile) = try await source.createProject(projectId: "test-app", senderId: "123456789012")
        _ = try await source.subscribe([token(1)], to: "news", in: project)
        let lines = try await exportLines(source)
        let (target, here) = try await makeRegistry()  // "test-app" with the same sender id, its own key
        await #expect {
            try await importLines(lines, into: target)
        } throws: { error in
            (error as? ImportFailure)?.problems.first?.problem.contains("--merge-credentials") == true
        }
        // Nothing of the refused batch: no topic (and no key; asked only once, after, as the
        // registry remembers a key's project for a second).
        #expect(try await target.topics(in: here, after: nil, limit: 10).items.isEmpty)
        try await importLines(lines, into: target, mergingCredentials: true)
        #expect(try await target.project(authenticatedBy: keyOfTheFile)?.projectId == "test-app")
        // The database the file came from: nothing new, so nothing refused.
        #expect(try await importLines(lines, into: source) == ImportTally())
    }

    @Test("What the target learned since wins: a token reported dead here stays dead, out of groups and topics")
    func deadTokensStayDead() async throws {
        let (source, project) = try await makeRegistry()
        _ = try await source.subscribe([token(1), token(2)], to: "news", in: project)
        _ = try await source.createGroup(named: "dead-only", tokens: [token(1)], in: project)
        _ = try await source.createGroup(named: "mixed", tokens: [token(1), token(2)], in: project)
        let lines = try await exportLines(source)
        let (target, here) = try await makeRegistry()
        _ = try await target.registerToken(token(1), in: here)
        try await Task.sleep(for: .milliseconds(5))
        _ = try await target.unregisterToken(token(1), in: here)
        try await importLines(lines, into: target, mergingCredentials: true)
        #expect(try await target.token(token(1), in: here)?.state == .unregistered)
        #expect(try await target.allSubscriptions(ofToken: token(1), in: here) == nil)
        #expect(try await target.groupMembers(named: "dead-only", in: here, after: nil, limit: 10) == nil)
        #expect(try await target.groupMembers(named: "mixed", in: here, after: nil, limit: 10)?.1.items.map(\.name) == [token(2)])
    }

    @Test("An import that stops leaves no topic without subscribers behind")
    func stoppedImportLeavesNoEmptyTopic() async throws {
        let registry = try await RegistryService(store: TestBackend.makeStore())
        let now = Self.now
        var lines = try fileOfProjectP(
            [.topic(TopicArchive(project: "p", name: "orphan", createdAt: now))]
                + (1...998).map {
                    .token(
                        TokenArchive(
                            project: "p", token: token($0), state: .registered, createdAt: now, updatedAt: now,
                            topics: []))
                })
        lines.append("not json")
        await #expect(throws: ImportFailure.self) { try await importLines(lines, into: registry) }
        let project = try #require(try await registry.projects().first)
        #expect(try await registry.token(token(998), in: project) != nil)
        #expect(try await registry.topics(in: project, after: nil, limit: 10).items.isEmpty)
    }

    @Test("A server on the same database follows an import through the change feed")
    func serversFollowAnImport() async throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("import-\(UUID()).sqlite").path
        defer { for suffix in ["", "-wal", "-shm"] { try? FileManager.default.removeItem(atPath: path + suffix) } }
        let (source, _, _) = try await sourceRegistry()
        let lines = try await exportLines(source)
        let server = try await RegistryService(store: TestStore.file(path))
        try await server.startAudience()
        let command = try await RegistryService(store: TestStore.file(path))
        try await importLines(lines, into: command, updatingAudience: false)
        _ = try await server.catchUp()
        let project = try #require(try await server.projects().first)
        let reached = try await server.resolve(
            .condition("'news' in topics && !('weather' in topics)", .v1), in: project, after: nil, pageSize: 100,
            countOnly: true)
        #expect(reached.count == 19)  // 30 on news, 10 also on weather, token 7 unregistered
        #expect(try await server.resolve(.topic("sports"), in: project, after: nil, pageSize: 10, countOnly: true).count == 1)
    }
}
