/// What FCM never showed: listings of groups, topics and their members, for the native API and
/// the command line.
extension RegistryService {
    public func projects() async throws -> [Project] {
        try await store.projects()
    }

    /// A page of the project's groups by name.
    public func groups(in project: Project, after: String?, limit: Int) async throws -> Page<GroupSummary> {
        try await store.groups(in: project, after: after, limit: limit)
    }

    /// A group and a page of its members; `nil` when there is no such group.
    public func groupMembers(named name: String, in project: Project, after: String?, limit: Int) async throws
        -> (GroupSummary, Page<Membership>)?
    {
        try await store.groupMembers(named: try groupName(name), in: project, after: after, limit: limit)
    }

    /// A page of the project's topics by name, with subscriber counts.
    public func topics(in project: Project, after: String?, limit: Int) async throws -> Page<TopicSummary> {
        try await store.topics(in: project, after: after, limit: limit)
    }

    /// A topic and a page of its subscribers; `nil` when no token is subscribed to it.
    public func topicSubscribers(named name: String, in project: Project, after: String?, limit: Int) async throws
        -> (TopicSummary, Page<Membership>)?
    {
        try await store.topicSubscribers(named: name, in: project, after: after, limit: limit)
    }

    /// The groups (by name) a token belongs to.
    public func groups(ofToken token: String, in project: Project) async throws -> [Membership] {
        try await store.groups(ofToken: token, in: project)
    }

    /// Entries and bytes of each project's message log, by project id (for metrics).
    public func messageLogUsage() async throws -> [String: (entries: Int, bytes: Int)] {
        try await messageLog.messageLogUsage()
    }
}
