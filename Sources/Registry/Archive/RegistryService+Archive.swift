import Foundation

/// Export and import (`fcm-registry export`, `import`, `import-groups`).
extension RegistryService {
    /// Streams every record of the registry, or of one project, to `emit`: the header first.
    /// - Throws: `RegistryError.projectNotFound` when `project` names none.
    public func export(
        project: String?, producer: String?, to emit: @escaping @Sendable (ArchiveRecord) throws -> Void
    ) async throws {
        if let project, try await store.projects().contains(where: { $0.projectId == project }) == false {
            throw RegistryError.projectNotFound(project)
        }
        try emit(.header(ArchiveHeader(exportedAt: .now, producer: producer)))
        try await archive.export(project: project, ownSecret: keys.secretBytes, to: emit)
    }

    /// Writes one batch of checked records (``ArchiveRecord/validated(limits:)``) as one
    /// transaction. Servers on the database follow it through the change feed.
    /// - Parameter updatingAudience: apply what it changed to this process's audience index; a
    ///   command that never loaded the index says no, so that its memory stays constant.
    /// - Throws: `ImportError` naming the line it could not take; nothing of the batch is written.
    /// - Parameter mergingCredentials: let the file add keys to projects already here
    ///   (``ArchiveStore/importBatch(_:limits:ownSecret:mergingCredentials:)``).
    public func importBatch(_ records: [NumberedRecord], updatingAudience: Bool = true, mergingCredentials: Bool = false)
        async throws -> ImportTally
    {
        let committed = try await archive.importBatch(
            records, limits: limits, ownSecret: keys.secretBytes, mergingCredentials: mergingCredentials)
        return updatingAudience ? applied(committed) : committed.value
    }

    /// Checks one batch as ``importBatch(_:updatingAudience:mergingCredentials:)`` would write it,
    /// and writes nothing.
    /// - Throws: the `ImportError` the import would throw.
    public func checkBatch(_ records: [NumberedRecord], mergingCredentials: Bool = false) async throws -> ImportTally {
        try await archive.checkBatch(
            records, limits: limits, ownSecret: keys.secretBytes, mergingCredentials: mergingCredentials)
    }

    /// How many records an export of `project` (or of everything) holds now, its header included.
    public func exportSize(project: String?) async throws -> Int {
        try await archive.exportSize(project: project) + 1
    }

    /// Ends an import: topics left without subscribers are deleted.
    public func finishImport() async throws {
        try await archive.finishImport()
    }
}
