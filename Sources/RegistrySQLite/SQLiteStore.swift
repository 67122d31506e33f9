import AudienceEngine
import Foundation
import GRDB
import Registry
import ServiceLifecycle

/// The registry's store on SQLite through GRDB.
///
/// Writes go through a group-commit writer: each call is one savepoint, many calls share a commit.
/// Reads run on the database's readers (concurrently, with a `DatabasePool`).
public struct SQLiteStore: ArchiveStore, RegistryStore {
    public let database: RegistryDatabase
    let writes: GroupCommitWriter
    /// Rung after each commit of this process's; the feed follower listens.
    let doorbell = FeedDoorbell()

    /// - Parameter feedRetention: entries of the change feed kept for followers that fall behind.
    public init(_ database: RegistryDatabase, feedRetention: Int = Limits().feedRetention) {
        self.database = database
        writes = GroupCommitWriter(database.writer, feedRetention: feedRetention, doorbell: doorbell)
    }

    /// What runs beside the store in `serve`'s service group: the group-commit writer.
    public var services: [any Service] { [writes] }

    /// Runs `body` as one all-or-nothing write; what it records in the log goes to the change
    /// feed in the same transaction, and comes back with its value.
    func committing<T: Sendable>(_ body: @escaping @Sendable (Database, ChangeLog) throws -> T) async throws
        -> Committed<T>
    {
        try await writes.write(body)
    }

    /// Runs `body` as one all-or-nothing write that changes nothing in the audience.
    func write<T: Sendable>(_ body: @escaping @Sendable (Database, ChangeLog) throws -> T) async throws -> T {
        try await writes.write(body).value
    }

    func read<T: Sendable>(_ body: @escaping @Sendable (Database) throws -> T) async throws -> T {
        try await database.writer.read(body)
    }
}

// MARK: - Shared SQL helpers

extension SQLiteStore {
    /// Ids as a JSON array, for `json_each`: one bound parameter however many there are.
    static func jsonList<ID: BinaryInteger>(_ ids: [ID]) -> String {
        "[" + ids.map { String($0) }.joined(separator: ",") + "]"
    }

    /// Strings (tokens, topic names) as a JSON array, for `json_each`.
    static func jsonList(_ values: [String]) throws -> String {
        String(decoding: try JSONEncoder().encode(values), as: UTF8.self)
    }
}

extension Database {
    /// A page of the tokens of a group or topic in token-id order; the cursor is the last token id.
    ///
    /// - Parameter sql: selects `id`, `value` and `since` for an owner id, a cursor and a limit, in that order.
    ///   A malformed cursor reads as "from the start".
    func tokenPage(sql: String, owner: Int64, after: String?, limit: Int) throws -> Page<Membership> {
        let rows = try Row.fetchAll(
            cachedStatement(sql: sql), arguments: [owner, after.flatMap(Int64.init) ?? 0, limit + 1])
        return Page(
            items: rows.prefix(limit).map { Membership(name: $0["value"], since: EpochMilliseconds.date($0["since"])) },
            nextAfter: rows.count > limit ? String(rows[limit - 1]["id"] as Int64) : nil)
    }
}

/// A named set of tokens as the tables keep it: a device group and its members, or a topic and
/// its subscribers. The names are the schema's, never a request's.
struct TokenSetTables {
    /// The table of the named rows, and of their members with the column naming the owner and the
    /// time each member joined.
    var owner: String
    var members: String
    var ownerColumn: String
    var joinedColumn: String

    static let groups = TokenSetTables(
        owner: "deviceGroup", members: "groupMember", ownerColumn: "groupId", joinedColumn: "addedAt")
    static let topics = TokenSetTables(
        owner: "topic", members: "subscription", ownerColumn: "topicId", joinedColumn: "createdAt")
}

extension Database {
    /// The set named `name`, with its member count and creation time, and a page of its members
    /// in token-id order; `nil` when there is no such set.
    func namedTokenSet(_ tables: TokenSetTables, named name: String, in project: Project, after: String?, limit: Int)
        throws -> ((count: Int, createdAt: Date), Page<Membership>)?
    {
        let (owner, members, column) = (tables.owner, tables.members, tables.ownerColumn)
        guard
            let set = try Row.fetchOne(
                self,
                sql: """
                    SELECT id, createdAt, (SELECT COUNT(*) FROM \(members) WHERE \(column) = \(owner).id) AS count
                    FROM \(owner) WHERE projectId = ? AND name = ?
                    """, arguments: [project.rowID, name])
        else { return nil }
        let page = try tokenPage(
            sql: """
                SELECT token.id, token.value, \(members).\(tables.joinedColumn) AS since FROM \(members)
                JOIN token ON token.id = \(members).tokenId
                WHERE \(members).\(column) = ? AND \(members).tokenId > ?
                ORDER BY \(members).tokenId LIMIT ?
                """, owner: set["id"], after: after, limit: limit)
        return ((set["count"], EpochMilliseconds.date(set["createdAt"])), page)
    }
}
