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

    @Test("Conflicting writes from many servers at once: replaying the feed gives the tables, in any interleaving")
    func replayEqualsTables() async throws {
        try await TestPostgres.withProject { store, project in
            let start = try await store.loadAudience().cursor
            let tokens = (0..<12).map(token)
            // Batches that lock many tokens one after another, against single writes on the same
            // tokens: the interleaving where an id taken early would commit late.
            try await withThrowingTaskGroup(of: Void.self) { group in
                for writer in 0..<8 {
                    group.addTask {
                        for round in 0..<6 {
                            let topic = "t\(round % 2)"
                            if (writer + round).isMultiple(of: 2) {
                                _ = try await store.subscribe(tokens, to: topic, topicLimit: 9, in: project)
                            } else if writer.isMultiple(of: 3) {
                                _ = try await store.unsubscribe(tokens.reversed(), from: topic, in: project)
                            } else {
                                _ = try? await store.createSubscription(
                                    token: tokens[(writer * 5 + round) % tokens.count], topic: topic, topicLimit: 9, in: project)
                                _ = try await store.deleteSubscription(
                                    token: tokens[(writer * 7 + round) % tokens.count], topic: topic, in: project)
                            }
                        }
                    }
                }
                try await group.waitForAll()
            }
            var replayed: [String: Set<UInt32>] = [:]
            for entry in try await drain(store, from: start).0 {
                switch entry.change {
                case .subscribed(_, let topic, let ids): replayed[topic, default: []].formUnion(ids)
                case .unsubscribed(_, let topic, let ids): replayed[topic, default: []].subtract(ids)
                default: break
                }
            }
            let tables = try await store.loadAudience().projects[project.rowID]?.topics ?? [:]
            for topic in ["t0", "t1"] {
                #expect(replayed[topic, default: []] == Set(tables[topic] ?? []), "\(topic)")
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

@Suite("PostgreSQL: the change feed, moved to another cluster", .enabled(if: TestPostgres.available, TestPostgres.skipped))
struct PostgresFeedMoveTests {
    /// A dump restored into a new cluster keeps positions of transaction ids the new cluster has
    /// not reached: without a new start, every new entry would fall below the pruning mark.
    @Test("A feed ahead of the cluster's transaction ids starts again at the next start; followers then read new writes")
    func feedFromAnotherCluster() async throws {
        try await TestPostgres.withProject { store, project in
            let far: Int64 = 1 << 60
            _ = try await store.database.query(
                #"UPDATE "audienceFeed" SET "prunedThrough" = \#(far)"#, logger: Logger(label: "test")
            )
            _ = try await store.database.query(
                #"""
                INSERT INTO "audienceChange" (position, "replayOrder", "projectId", kind, topic, "tokenIds", "createdAt")
                VALUES (\#(far + 1), 1, \#(project.rowID), 'registered', NULL, ''::bytea, 0)
                """#, logger: Logger(label: "test")
            )
            #expect(try await store.migrate() == [])
            let load = try await store.loadAudience()
            let written = try await store.subscribe(["moved:APA91b" + String(repeating: "m", count: 40)], to: "news", topicLimit: 9, in: project)
            let read = try await store.changes(after: load.cursor, limit: 10)
            #expect(!read.truncated)
            #expect(read.entries == written.changes)
            #expect(try await store.migrate() == [])
            #expect(try await !store.changes(after: read.next, limit: 10).truncated)
        }
    }
}

@Suite("PostgreSQL: the change feed under a long transaction", .enabled(if: TestPostgres.available, TestPostgres.skipped))
struct PostgresFeedLongTransactionTests {
    /// A transaction left open anywhere in the cluster (an idle session, a long import) holds the
    /// frontier back while writes go on past the feed's retention: pruning must not take what a
    /// reader held back there has read, or every server would reload again and again.
    @Test("Writes past the retention while a transaction stays open: a reader is never told it missed entries")
    func pruningUnderAnOpenTransaction() async throws {
        try await TestPostgres.withProject { store, project in
            let small = try PostgresStore(store.location, feedRetention: 10, maximumConnections: 4, logger: Logger(label: "test"))
            try await store.database.withConnection { holder in
                _ = try await holder.query("BEGIN", logger: Logger(label: "test")).collect()
                _ = try await holder.query("SELECT pg_current_xact_id()", logger: Logger(label: "test")).collect()
                var cursor = try await small.loadAudience().cursor
                for n in 0..<1_010 {
                    _ = try await small.subscribe(["long\(n):APA91b" + String(repeating: "l", count: 40)], to: "t", topicLimit: 9, in: project)
                    if n % 100 == 0 {
                        let read = try await small.changes(after: cursor, limit: 10_000)
                        let truncated = read.truncated
                        #expect(!truncated, "after \(n) writes")
                        cursor = read.next
                    }
                }
                let truncated = try await small.changes(after: cursor, limit: 10_000).truncated
                #expect(!truncated)
                let reloaded = try await small.loadAudience()
                #expect(try await !small.changes(after: reloaded.cursor, limit: 10).truncated)
                _ = try await holder.query("ROLLBACK", logger: Logger(label: "test")).collect()
            }
            await small.close()
        }
    }
}
