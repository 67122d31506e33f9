import AudienceEngine
import Foundation
import Logging
import PostgresNIO
import Registry
import RegistryPostgres
import Testing

@Suite("PostgreSQL: the change feed", .enabled(if: TestPostgres.available, TestPostgres.skipped))
struct PostgresFeedTests {
    func token(_ n: Int) -> String { "pf\(n):APA91b" + String(repeating: "f", count: 40) }

    /// Reads the feed from `cursor` until it is empty: every entry read, and the cursor reached.
    func drain(_ store: PostgresStore, from cursor: FeedCursor, limit: Int = 7) async throws -> ([FeedEntry], FeedCursor) {
        var cursor = cursor
        var entries: [FeedEntry] = []
        while true {
            let read = try await store.changes(after: cursor, limit: limit)
            #expect(!read.truncated)
            entries += read.entries
            cursor = read.next
            if read.entries.isEmpty { return (entries, cursor) }
        }
    }

    @Test("A write's changes are read once, in its order; the load's cursor has them all")
    func readOnce() async throws {
        try await TestPostgres.withProject { store, project in
            let start = try await store.loadAudience().cursor
            let written = try await store.subscribe([token(1), token(2)], to: "news", topicLimit: 9, in: project)
            let (read, cursor) = try await drain(store, from: start)
            #expect(read == written.changes)
            #expect(try await store.changes(after: cursor, limit: 10).entries.isEmpty)
            let load = try await store.loadAudience()
            #expect(load.projects[project.rowID]?.topics["news"] == [1, 2])
            #expect(load.projects[project.rowID]?.registered == [1, 2])
            #expect(try await drain(store, from: load.cursor).0.isEmpty)
        }
    }

    @Test("A change that commits late under an older transaction is read when it commits, never passed")
    func lateCommit() async throws {
        try await TestPostgres.withProject { store, project in
            let start = try await store.loadAudience().cursor
            try await store.client.withConnection { late in
                // An older transaction writes a change and stays open.
                _ = try await late.query("BEGIN", logger: Logger(label: "test")).collect()
                let xid = try await late.query("SELECT pg_current_xact_id()::text::bigint", logger: Logger(label: "test"))
                    .decode(Int64.self).reduce(into: [Int64]()) { $0.append($1) }[0]
                let position = xid << 20
                _ = try await late.query(
                    #"""
                    INSERT INTO "audienceChange" (position, "projectId", kind, topic, "tokenIds", "createdAt")
                    VALUES (\#(position), \#(project.rowID), 'registered', NULL, \#(Data([9, 0, 0, 0])), 0)
                    """#, logger: Logger(label: "test")
                ).collect()
                // Younger transactions commit meanwhile, and are read at once.
                let younger = try await store.subscribe([token(1)], to: "a", topicLimit: 9, in: project)
                let (first, cursor) = try await drain(store, from: start)
                #expect(first == younger.changes)
                #expect(cursor.watermark < position)
                // The old one commits: the next read has it, and only it.
                _ = try await late.query("COMMIT", logger: Logger(label: "test")).collect()
                let (second, after) = try await drain(store, from: cursor)
                #expect(second.map(\.id) == [position])
                #expect(try await drain(store, from: after).0.isEmpty)
            }
        }
    }

    @Test("Eight writers and a reader at once: the reader gets every change exactly once")
    func concurrent() async throws {
        try await TestPostgres.withProject { store, project in
            let start = try await store.loadAudience().cursor
            let done = Done()
            let reader = Task {
                var cursor = start
                var seen: [Int64] = []
                while await !done.value {
                    let read = try await store.changes(after: cursor, limit: 5)
                    seen += read.entries.map(\.id)
                    cursor = read.next
                }
                return (seen, cursor)
            }
            let written = try await withThrowingTaskGroup(of: [Int64].self) { group in
                for writer in 0..<8 {
                    group.addTask {
                        var positions: [Int64] = []
                        for n in 0..<15 {
                            let change = try await store.subscribe(
                                [token(writer * 100 + n)], to: "t\(n % 3)", topicLimit: 9, in: project)
                            positions += change.changes.map(\.id)
                        }
                        return positions
                    }
                }
                return try await group.reduce(into: []) { $0 += $1 }
            }
            await done.set()
            let (seen, cursor) = try await reader.value
            let (rest, _) = try await drain(store, from: cursor)
            let all = seen + rest.map(\.id)
            #expect(all.count == written.count)
            #expect(Set(all) == Set(written))
        }
    }
}

/// Tells a reader the writers are done.
actor Done {
    private(set) var value = false
    func set() { value = true }
}
