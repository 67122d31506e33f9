import Audience
import GRDB
import Registry

extension SQLiteStore {
    public func loadAudience() async throws -> AudienceLoad {
        // One read transaction: the tables and the feed position are one consistent state.
        try await read { db in
            let position = try ChangeFeedSQL.head(db)
            var projects: [Int64: (topics: [String: [UInt32]], registered: [UInt32])] = [:]
            for project in try Int64.fetchAll(db, sql: "SELECT id FROM project") {
                var topics: [String: [UInt32]] = [:]
                let members = try db.cachedStatement(
                    sql: "SELECT tokenId FROM subscription WHERE topicId = ? ORDER BY tokenId")
                for topic in try Row.fetchAll(
                    db, sql: "SELECT id, name FROM topic WHERE projectId = ?", arguments: [project])
                {
                    var ids: [UInt32] = []
                    let cursor = try Int64.fetchCursor(members, arguments: [topic["id"] as Int64])
                    while let id = try cursor.next() { ids.append(UInt32(id)) }
                    topics[topic["name"]] = ids
                }
                var registered: [UInt32] = []
                let cursor = try Int64.fetchCursor(
                    db, sql: "SELECT id FROM token WHERE projectId = ? AND state = 'registered' ORDER BY id",
                    arguments: [project])
                while let id = try cursor.next() { registered.append(UInt32(id)) }
                projects[project] = (topics, registered)
            }
            return AudienceLoad(projects: projects, position: position)
        }
    }

    public func feed(after position: Int64, limit: Int) async throws -> FeedRead {
        try await read { db in try ChangeFeedSQL.read(db, after: position, limit: limit) }
    }

    public func feedHead() async throws -> Int64 {
        try await read { db in try ChangeFeedSQL.head(db) }
    }

    public func tokenValues(ids: [UInt32], in project: Project) async throws -> [String] {
        guard !ids.isEmpty else { return [] }
        // One statement for the whole page: the ids travel as one JSON array, bound like any value.
        // SQLite looks the ids up in ascending order (the plan is rowid searches over the sorted
        // list, with no sort step), so the values come back in the order they are listed in.
        let arguments: StatementArguments = [project.rowID, "[" + ids.map { String($0) }.joined(separator: ",") + "]"]
        return try await read { db in
            try String.fetchAll(
                db.cachedStatement(
                    sql: "SELECT value FROM token WHERE projectId = ? AND id IN (SELECT value FROM json_each(?)) ORDER BY id"),
                arguments: arguments)
        }
    }

    public func tokenID(_ token: String, in project: Project) async throws -> UInt32? {
        try await read { db in
            guard let row = try db.tokenRow(token, in: project), row.state == .registered else { return nil }
            return UInt32(row.id)
        }
    }

    public func memberIDs(ofGroup id: Int64?, named name: String?, in project: Project) async throws -> [UInt32]? {
        try await read { db in
            let groupID: Int64?
            if let id {
                groupID = try Int64.fetchOne(
                    db, sql: "SELECT id FROM deviceGroup WHERE id = ? AND projectId = ?",
                    arguments: [id, project.rowID])
            } else {
                groupID = try Int64.fetchOne(
                    db, sql: "SELECT id FROM deviceGroup WHERE name = ? AND projectId = ?",
                    arguments: [name, project.rowID])
            }
            guard let groupID else { return nil }
            return try Int64.fetchAll(
                db, sql: "SELECT tokenId FROM groupMember WHERE groupId = ? ORDER BY tokenId", arguments: [groupID]
            ).map { UInt32($0) }
        }
    }
}
