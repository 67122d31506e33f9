import AudienceEngine
import Foundation
import NIOCore
import PostgresNIO
import Registry

extension SyntheticRegistry {
    /// Fills `store` (a database with no projects) with one project and the synthetic data, the
    /// same as on SQLite for the same seed. Rows go in with `COPY`, the token index of
    /// `subscription` is built once at the end, and a `reset` entry tells every server following
    /// the database to reload.
    /// - Parameter progress: told the rows written so far, of ``rowCount()``, now and then.
    /// - Returns: the project and its server key.
    public func generate(
        into store: PostgresStore, projectId: String = "bench", senderId: String = "200000000000",
        progress: @escaping @Sendable (Int) -> Void = { _ in }
    ) async throws -> (Project, serverKey: String) {
        let registry = try await RegistryService(store: store)
        guard try await registry.projects().isEmpty else { throw PostgresStoreError("the database already has projects") }
        let (project, key) = try await registry.createProject(projectId: projectId, senderId: senderId)
        let (tokens, topics, seed) = (tokens, topics, seed)
        let sizes = topicSizes()
        let now = EpochMilliseconds.now()
        let owner = project.rowID
        try await store.database.withConnection(bounded: false) { connection in
            try await Self.copy(into: "token", ["id", "projectId", "value", "state", "createdAt", "updatedAt"], connection) { line in
                for id in 1...tokens {
                    try await line("\(id)\t\(owner)\t\(Self.tokenValue(seed: seed, id: id))\tregistered\t\(now)\t\(now)\n")
                    if id % Self.progressStep == 0 { progress(id) }
                }
            }
            try await Self.copy(into: "topic", ["id", "projectId", "name", "createdAt"], connection) { line in
                for id in 1...topics { try await line("\(id)\t\(owner)\ttopic-\(id)\t\(now)\n") }
            }
            progress(tokens + topics)
            try await connection.run(#"DROP INDEX "subscription_tokenId""#)
            try await Self.copy(into: "subscription", ["topicId", "tokenId", "createdAt"], connection) { line in
                var random = SplitMix64(seed: seed)
                var written = tokens + topics
                for topic in 0..<topics {
                    for token in Self.sample(sizes[topic], from: tokens, using: &random) {
                        try await line("\(topic + 1)\t\(token)\t\(now)\n")
                        written += 1
                        if written % Self.progressStep == 0 { progress(written) }
                    }
                }
            }
            try await connection.run(#"CREATE INDEX "subscription_tokenId" ON subscription("tokenId")"#)
            // Ids were given explicitly: the identity sequences go on after them.
            try await connection.run("SELECT setval(pg_get_serial_sequence('token', 'id'), \(Int64(tokens)))")
            try await connection.run("SELECT setval(pg_get_serial_sequence('topic', 'id'), \(Int64(topics)))")
            // These tables only: a database-wide ANALYZE would visit other schemas too, being dropped.
            try await connection.run("ANALYZE token, topic, subscription")
        }
        // The rows above bypassed the feed: tell every follower to reload.
        _ = try await store.committing { _, log in log.record(.reset) }
        return (project, key)
    }

    /// Streams the rows `rows` writes, as `COPY`'s text lines, in buffers of about a megabyte.
    private static func copy(
        into table: String, _ columns: [String], _ connection: PostgresConnection,
        _ rows: (_ line: (String) async throws -> Void) async throws -> Void
    ) async throws {
        try await connection.copyFrom(table: table, columns: columns, logger: .silent) { writer in
            var buffer = ByteBuffer()
            buffer.reserveCapacity(1 << 20)
            try await rows { line in
                buffer.writeString(line)
                if buffer.readableBytes >= 1 << 20 {
                    try await writer.write(buffer)
                    buffer.clear()
                }
            }
            if buffer.readableBytes > 0 { try await writer.write(buffer) }
        }
    }
}
