import Foundation
import PostgresNIO
import Registry

/// Notification keys of groups imported from Google or another registry: the keys kept as they
/// were issued, and the keyrings that open keys sealed elsewhere.
extension PostgresStore: RegistryStore {
    /// What an opened key names when its group is gone: an id no group has.
    static let deletedGroup: Int64 = 0

    public func groupID(
        forImportedKey key: String, in project: Project,
        opening open: @escaping @Sendable ([NotificationKeyring]) -> (keyring: Int64, group: Int64)?
    ) async throws -> Int64? {
        try await database.withConnection { connection in
            if let (groupID) = try await connection.first(
                #"SELECT "groupId" FROM "importedKey" WHERE "projectId" = \#(project.rowID) AND "notificationKey" = \#(key)"#,
                as: Int64?.self)
            {
                return groupID ?? Self.deletedGroup
            }
            var keyrings: [NotificationKeyring] = []
            for try await (id, secret, sealedFor) in try await connection.query(
                #"SELECT id, secret, "sealedFor" FROM keyring WHERE "projectId" = \#(project.rowID) ORDER BY id"#, logger: .silent
            ).decode((Int64, Data, Int64).self) {
                keyrings.append(NotificationKeyring(id: id, secret: [UInt8](secret), sealedFor: sealedFor))
            }
            guard !keyrings.isEmpty, let (keyring, group) = open(keyrings) else { return nil }
            // A key the keyring opens is a notification key, even of a group not (or no more) here.
            let mapped = try await connection.first(
                #"SELECT "groupId" FROM "keyringGroup" WHERE "keyringId" = \#(keyring) AND "sourceGroupId" = \#(group)"#,
                as: Int64?.self)
            return (mapped ?? nil) ?? Self.deletedGroup
        }
    }
}
