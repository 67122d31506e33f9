import Foundation
import PostgresNIO
import Registry

/// A service account and an upstream, as the `relay` and `mirror` tables both keep them.
extension PostgresStore {
    /// The columns a `relay` or `mirror` row keeps its service account and upstream in, alike.
    static let serviceAccountColumns =
        #""firebaseProjectId", "clientEmail", "privateKeyId", "privateKey", "tokenUri", upstream"#

    /// Settings from `serviceAccountColumns`, in their order.
    static func serviceAccountSettings(
        _ columns: (String, String, String?, String, String, String)
    ) -> RelaySettings {
        RelaySettings(
            firebaseProjectID: columns.0, clientEmail: columns.1, privateKeyID: columns.2, privateKey: columns.3,
            tokenURI: columns.4, upstream: columns.5)
    }
}

extension PostgresConnection {
    /// Inserts or replaces the project's service account and upstream in `table` (`relay` or
    /// `mirror`, never a value from outside); `alsoSetting` is more of the update's SET clause.
    func storeServiceAccountSettings(
        _ settings: RelaySettings, of project: Project, in table: String, alsoSetting: String = "", now: Int64
    ) async throws {
        try await run(
            #"""
            INSERT INTO \#(unescaped: table) ("projectId", \#(unescaped: PostgresStore.serviceAccountColumns), "createdAt")
            VALUES (\#(project.rowID), \#(settings.firebaseProjectID), \#(settings.clientEmail), \#(settings.privateKeyID),
                    \#(settings.privateKey), \#(settings.tokenURI), \#(settings.upstream), \#(now))
            ON CONFLICT ("projectId") DO UPDATE SET
              "firebaseProjectId" = excluded."firebaseProjectId", "clientEmail" = excluded."clientEmail",
              "privateKeyId" = excluded."privateKeyId", "privateKey" = excluded."privateKey",
              "tokenUri" = excluded."tokenUri", upstream = excluded.upstream\#(unescaped: alsoSetting)
            """#)
    }
}
