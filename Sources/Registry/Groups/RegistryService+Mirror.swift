import Foundation

/// The mirror of Google's device groups (`project mirror`), for the months before Google turns
/// them down: Google stays the truth, and this database learns every group the app touches.
extension RegistryService {
    /// Forwards a device-group call to Google when `project` mirrors, records it here when Google
    /// accepted it, and returns Google's answer for the app; `nil` when the project does not
    /// mirror (the call is answered here, as always).
    ///
    /// What this database would refuse to record (a name or tokens it cannot take) is refused
    /// before Google is asked, and what Google refuses is not recorded: the app is never told of
    /// a change that only one side made.
    /// - Throws: `MirrorUnreachable` when Google gave no answer (nothing recorded); `MirrorFault`
    ///   when Google's answer cannot be used or refused the mirror's service account (nothing
    ///   recorded), or when Google accepted a change this database then could not record; the
    ///   registry's own errors for a call it would not record.
    public func mirrored(_ call: MirroredGroupCall, in project: Project) async throws -> MirrorAnswer? {
        guard let mirror, let settings = try await cachedMirrorSettings(of: project) else { return nil }
        switch call {
        case .create(let name, let tokens):
            _ = try groupName(name)
            guard !usableTokens(tokens).isEmpty else { throw RegistryError.noValidRegistrationIds }
        case .add(let name, _, let tokens), .remove(let name, _, let tokens):
            _ = try name.map(groupName)
            guard !usableTokens(tokens).isEmpty else { throw RegistryError.noValidRegistrationIds }
        case .lookUp(let name):
            _ = try groupName(name)
        }
        var answer = try await mirror.forward(call, senderID: project.senderId, settings: settings, project: project.rowID)
        guard answer.status == 200 else { return answer }
        guard answer.notificationKey != nil else { throw MirrorFault.unusableAnswer("no notification_key") }
        do {
            try await record(call, keyFromGoogle: answer.notificationKey, in: project)
        } catch {
            let reason = Self.recordingFailure(error)
            guard case .lookUp = call else { throw MirrorFault.notRecorded(operation: call.operation, reason: reason) }
            // A look-up changed nothing at Google, and the group keeps the keys recorded before.
            answer.keyNotKept = reason
        }
        return answer
    }

    /// Why a change Google accepted could not be written here, in words for the app and the log.
    private static func recordingFailure(_ error: any Error) -> String {
        switch error {
        case let problem as ArchiveProblem: problem.message
        case let problem as ImportError: problem.problem
        case let refusal as RegistryError: "\(refusal)"
        case let failure as any StoreConnectionFailure: "the database cannot be reached: \(failure.summary)"
        default: "the database refused the write: \(String(describing: type(of: error)))"
        }
    }

    /// Writes here what Google has just done.
    private func record(_ call: MirroredGroupCall, keyFromGoogle: String?, in project: Project) async throws {
        switch call {
        case .create(let name, let tokens):
            guard let key = keyFromGoogle else { return }
            try await importGroup(named: try groupName(name), key: key, tokens: usableTokens(tokens), complete: true, in: project)
        case .add(let name, let key, let tokens):
            let usable = usableTokens(tokens)
            if let id = try await groupID(forNotificationKey: key, in: project) {
                _ = applied(
                    try await store.addMembers(
                        usable, toGroup: id, expectedName: try name.map(groupName), memberLimit: limits.membersPerGroup,
                        in: project))
            } else if let name {
                // Made at Google before the mirror: its other members are not known here.
                try await importGroup(named: try groupName(name), key: key, tokens: usable, complete: false, in: project)
            }
        case .remove(let name, let key, let tokens):
            guard let id = try await groupID(forNotificationKey: key, in: project) else { return }
            _ = try await store.removeMembers(usableTokens(tokens), fromGroup: id, expectedName: try name.map(groupName), in: project)
        case .lookUp(let name):
            // Google answers another key on each look-up, and the app may send to any of them: a
            // group known here keeps each. (The merge takes a member with the key: one it has.)
            guard let key = keyFromGoogle,
                let (_, members) = try await store.groupMembers(named: try groupName(name), in: project, after: nil, limit: 1),
                let member = members.items.first
            else { return }
            try await importGroup(named: try groupName(name), key: key, tokens: [member.name], complete: true, in: project)
        }
    }

    /// A group with Google's key, through the import's merge: a group of that name gains the
    /// members and the key, a new one is created (incomplete unless `complete`).
    private func importGroup(named name: String, key: String, tokens: [String], complete: Bool, in project: Project)
        async throws
    {
        let now = Date()
        let record = ArchiveRecord.group(
            GroupArchive(
                project: project.projectId, name: name, createdAt: now,
                members: tokens.map { GroupArchive.Member(token: $0, since: now) }, keyringIds: [], notificationKeys: [key],
                complete: complete))
        _ = try await importBatch([NumberedRecord(line: 1, record: try record.validated(limits: limits))])
    }

    /// A send to a device group this database knows only in part, while the project mirrors:
    /// handed to Google as an HTTP v1 send to the notification key, so that members never seen
    /// here get it too. `nil` when the message is not such a send (it fans out here, as always).
    /// Only a group that may be incomplete costs a look at the mirror's settings: groups are
    /// complete unless the mirror met them first.
    func mirroredGroupSend(
        _ message: Message, via protocolName: MessageProtocol, key: String, group: Int64, in project: Project
    ) async throws -> (problem: MessageProblem?, knownMembers: Int)? {
        guard let mirror, try await !store.isGroupComplete(group, in: project),
            let settings = try await cachedMirrorSettings(of: project)
        else { return nil }
        try MessageRules.checkContent(message)
        let known = try await store.memberIDs(ofGroup: group, named: nil, in: project)?.count ?? 0
        if message.options.dryRun { return (nil, known) }
        do {
            let problem = try await mirror.send(
                message, via: protocolName, toNotificationKey: key, settings: settings, project: project.rowID)
            return (problem, known)
        } catch is MirrorUnreachable {
            return (.unavailable(retryAfter: 1), known)
        } catch is MirrorFault {
            // The mirror's service account refused: the send may go once the configuration is fixed.
            return (.unavailable(retryAfter: 1), known)
        }
    }

    /// Turns the mirror on for `project` with `settings`, or off with `nil`. Audited as
    /// `mirror.enabled` or `mirror.disabled`.
    public func setMirror(_ settings: ChannelSettings?, for project: Project, by actor: AuditActor = .commandLine)
        async throws
    {
        let entry = audit(
            settings == nil ? .mirrorDisabled : .mirrorEnabled, target: project.projectId,
            details: settings.map(Self.shownSettings) ?? [:], by: actor, project: project.rowID)
        try await store.setMirrorSettings(settings, for: project, audit: entry)
        mirrorSettingsCache.forget(project.rowID)
    }

    /// The project's mirror settings as device-group calls see them: read at most once a second.
    func cachedMirrorSettings(of project: Project) async throws -> ChannelSettings? {
        try await mirrorSettingsCache.value(of: project.rowID) { try await store.mirrorSettings(of: project) }
    }

    public func mirrorSettings(of project: Project) async throws -> ChannelSettings? {
        try await store.mirrorSettings(of: project)
    }

    /// What `project mirror --report` shows.
    public func groupCompleteness(in project: Project) async throws -> GroupCompleteness {
        try await store.groupCompleteness(in: project)
    }
}
