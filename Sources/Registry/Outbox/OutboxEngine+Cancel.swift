import Foundation

/// Cancelling a relayed message, once for every store: its job finishes at once, and what had no
/// outcome is cancelled. Nothing is written per recipient (a cancelled fan-out of millions is one
/// statement): the job's `cancelledAt` says that its pending rows and the recipients its walk had
/// not reached are cancelled, and the listings read them so.
extension OutboxStore where Self: OutboxDriver {
    public func cancel(message id: String, in project: Project, now: Date, audit: AuditWrite?) async throws
        -> DeliveryCounts?
    {
        guard let job = try await loggedJob(ofMessage: id, in: project.rowID) else { return nil }
        var cancelled = false
        if !job.finished {
            cancelled = try await cancelJob(
                job.id, project: project.rowID, messageID: id, now: EpochMilliseconds.milliseconds(now), audit: audit)
        }
        // The counts answered are the ones kept, read after the cancel.
        let after = try await loggedJob(ofMessage: id, in: project.rowID) ?? job
        guard cancelled else { throw RegistryError.messageFinished }
        return DeliveryCounts(after)
    }
}
