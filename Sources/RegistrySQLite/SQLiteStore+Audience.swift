import GRDB
import Registry

extension SQLiteStore {
    public func loadAudience() async throws {
        let projects = try await read { db in try Int64.fetchAll(db, sql: "SELECT id FROM project") }
        for project in projects {
            let (topics, registered) = try await read { db in
                var topics: [String: [UInt32]] = [:]
                let members = try db.cachedStatement(
                    sql: "SELECT tokenId FROM subscription WHERE topicId = ? ORDER BY tokenId")
                for topic in try Row.fetchAll(
                    db, sql: "SELECT id, name FROM topic WHERE projectId = ?", arguments: [project])
                {
                    topics[topic["name"]] = try Int64.fetchAll(members, arguments: [topic["id"] as Int64]).map {
                        UInt32($0)
                    }
                }
                let registered = try Int64.fetchAll(
                    db, sql: "SELECT id FROM token WHERE projectId = ? AND state = 'registered' ORDER BY id",
                    arguments: [project]
                ).map { UInt32($0) }
                return (topics, registered)
            }
            audience.load(project: project, topics: topics, registered: registered)
        }
    }

    public func tokenValues(ids: [UInt32], in project: Project) async throws -> [String] {
        try await read { db in
            let statement = try db.cachedStatement(sql: "SELECT value FROM token WHERE id = ? AND projectId = ?")
            return try ids.compactMap { try String.fetchOne(statement, arguments: [Int64($0), project.rowID]) }
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
