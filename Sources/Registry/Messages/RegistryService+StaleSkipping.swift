import AudienceEngine
import Foundation

extension RegistryService {
    /// A fan-out's recipients without its stale tokens, when the project's token policy says not to
    /// send to them (`sendToStale` false), and how many were left out.
    ///
    /// Stale is exactly what a token's `fresh` says: last seen (`lastSeenAt`, else `updatedAt`)
    /// longer than `staleAfter` ago. Topic, condition and device-group sends are narrowed; a send
    /// to a named token never is: the sender asked for that device.
    func skippingStale(_ recipients: RoaringBitmap, in project: Project, now: Date = Date()) async throws
        -> (recipients: RoaringBitmap, skipped: Int)
    {
        guard !recipients.isEmpty else { return (recipients, 0) }
        let policy = try await tokenPolicy(of: project)
        guard !policy.sendToStale else { return (recipients, 0) }
        let cutoff = now.addingTimeInterval(-Double(policy.staleAfter.components.seconds))
        let stale = try await store.registeredTokenIDs(lastSeenBefore: cutoff, in: project)
        guard !stale.isEmpty else { return (recipients, 0) }
        return await CostlyWork.run {
            var kept = recipients
            kept.subtract(RoaringBitmap(stale))
            return (kept, recipients.count - kept.count)
        }
    }
}
