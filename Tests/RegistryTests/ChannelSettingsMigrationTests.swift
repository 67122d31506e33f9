import Foundation
import GRDB
import Logging
import PostgresNIO
@testable import Registry
@testable import RegistryPostgres
@testable import RegistrySQLite
import TestBackends
import Testing

/// A database whose `relay` and `mirror` rows kept FCM's service account in columns of their own
/// (SQLite before v15, PostgreSQL before v9) opens with them as the `fcm-v1` channel's settings,
/// the key among the secrets, and the relay's counts, pause and last error as they were.
@Suite("Channel settings: old databases open")
struct ChannelSettingsMigrationTests {
    /// What the old rows hold, as the channel's settings.
    static let relay = ChannelSettings(
        channel: "fcm-v1",
        settings: [
            "firebaseProjectId": .string("fb"), "clientEmail": .string("relay@fb.iam.gserviceaccount.com"),
            "privateKeyId": .string("k1"), "tokenUri": .string("https://oauth2.googleapis.com/token"),
            "upstream": .string("https://fcm.googleapis.com"),
        ],
        secrets: ["privateKey": .string("-----BEGIN PRIVATE KEY-----\nMA==\n-----END PRIVATE KEY-----\n")])
    static let mirror = ChannelSettings(
        channel: "fcm-v1",
        settings: [
            "firebaseProjectId": .string("fb"), "clientEmail": .string("mirror@fb.iam.gserviceaccount.com"),
            "privateKeyId": .null, "tokenUri": .string("https://oauth2.googleapis.com/token"),
            "upstream": .string("http://127.0.0.1:9"),
        ],
        secrets: ["privateKey": .string("mirror key")])
    static let project = Project(rowID: 1, projectId: "app", senderId: "1")

    @Test("SQLite: v15 moves the relay and mirror rows into the channel's settings")
    func sqlite() async throws {
        var configuration = Configuration()
        configuration.foreignKeysEnabled = true
        let queue = try DatabaseQueue(configuration: configuration)
        try Migrations.migrator.migrate(queue, upTo: "v14 minute stats")
        try await queue.write { db in
            try db.execute(sql: "INSERT INTO project (id, projectId, senderId, createdAt) VALUES (1, 'app', '1', 0)")
            try db.execute(
                sql: """
                    INSERT INTO relay (projectId, firebaseProjectId, clientEmail, privateKeyId, privateKey, tokenUri, upstream,
                      pausedUntil, lastError, delivered, failed, pruned, createdAt)
                    VALUES (1, 'fb', 'relay@fb.iam.gserviceaccount.com', 'k1', ?, 'https://oauth2.googleapis.com/token',
                      'https://fcm.googleapis.com', 1, 'HTTP_404', 7, 2, 1, 0)
                    """, arguments: [Self.relay.secrets["privateKey"]?.string])
            try db.execute(
                sql: """
                    INSERT INTO mirror (projectId, firebaseProjectId, clientEmail, privateKeyId, privateKey, tokenUri, upstream, createdAt)
                    VALUES (1, 'fb', 'mirror@fb.iam.gserviceaccount.com', NULL, 'mirror key', 'https://oauth2.googleapis.com/token',
                      'http://127.0.0.1:9', 0)
                    """)
        }
        try await Self.expectMoved(SQLiteStore(try RegistryDatabase(queue)))
    }

    @Test(
        "PostgreSQL: v9 moves the relay and mirror rows into the channel's settings",
        .enabled(if: TestPostgres.available, TestPostgres.skipped))
    func postgres() async throws {
        try await TestPostgres.withStore { store in
            try await store.database.withConnection { connection in
                _ = try await PostgresMigrations.migrate(connection, logger: Logger(label: "test"), upTo: "v8-minute-stats")
                let key = Self.relay.secrets["privateKey"]?.string
                try await connection.run(
                    #"INSERT INTO project (id, "projectId", "senderId", "createdAt") VALUES (1, 'app', '1', 0)"#)
                try await connection.run(
                    #"""
                    INSERT INTO relay ("projectId", "firebaseProjectId", "clientEmail", "privateKeyId", "privateKey", "tokenUri",
                      upstream, "pausedUntil", "lastError", delivered, failed, pruned, "createdAt")
                    VALUES (1, 'fb', 'relay@fb.iam.gserviceaccount.com', 'k1', \#(key), 'https://oauth2.googleapis.com/token',
                      'https://fcm.googleapis.com', 1, 'HTTP_404', 7, 2, 1, 0)
                    """#)
                try await connection.run(
                    #"""
                    INSERT INTO mirror ("projectId", "firebaseProjectId", "clientEmail", "privateKeyId", "privateKey", "tokenUri",
                      upstream, "createdAt")
                    VALUES (1, 'fb', 'mirror@fb.iam.gserviceaccount.com', NULL, 'mirror key', 'https://oauth2.googleapis.com/token',
                      'http://127.0.0.1:9', 0)
                    """#)
            }
            #expect(try await store.migrate().first == "v9-channel-settings")
            try await Self.expectMoved(store)
        }
    }

    static func expectMoved(_ store: any RegistryBackend) async throws {
        #expect(try await store.relaySettings() == [1: relay])
        #expect(try await store.mirrorSettings(of: project) == mirror)
        let status = try #require(try await store.relayStatus(of: project))
        #expect(status.channel == "fcm-v1")
        #expect(status.settings == relay.settings)
        #expect([status.delivered, status.failed, status.pruned] == [Int]([7, 2, 1]))
        #expect(status.lastError == "HTTP_404")
        // Settings written now replace them whole.
        let web = ChannelSettings(channel: "web-push", settings: ["subject": .string("mailto:ops@example.com")], secrets: [:])
        try await store.setRelay(web, for: project)
        #expect(try await store.relaySettings() == [1: web])
        try await store.setMirrorSettings(nil, for: project)
        #expect(try await store.mirrorSettings(of: project) == nil)
    }
}
