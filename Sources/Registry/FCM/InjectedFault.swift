import Synchronization

/// An error the emulator answers on purpose, so that an app server's test suite can drive every
/// error path of FCM: `PUT /api/tokens/{token}/fault` for the sends to one token,
/// `PUT /api/fault` for every send of the project.
public struct InjectedFault: Sendable, Hashable {
    /// FCM's error codes a fault can play, by their HTTP v1 names.
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        case unregistered = "UNREGISTERED"
        case senderIDMismatch = "SENDER_ID_MISMATCH"
        case invalidArgument = "INVALID_ARGUMENT"
        case unavailable = "UNAVAILABLE"
        case `internal` = "INTERNAL"
        case quotaExceeded = "QUOTA_EXCEEDED"
    }

    public var kind: Kind
    /// Sends left to fail; `nil`: until the fault is removed.
    public var remaining: Int?
    /// Seconds the answer's `Retry-After` asks for (UNAVAILABLE, INTERNAL, QUOTA_EXCEEDED).
    public var retryAfter: Int?

    public static let maximumTimes = 1_000_000
    public static let maximumRetryAfter = 3_600

    public init(kind: Kind, remaining: Int?, retryAfter: Int?) {
        self.kind = kind
        self.remaining = remaining
        self.retryAfter = retryAfter
    }

    /// The problem a send meets, in the pipeline's terms.
    func problem(token: String?, toTopics: Bool) -> MessageProblem {
        switch kind {
        case .unregistered: .notRegistered(token ?? "")
        case .senderIDMismatch: .senderIDMismatch(token ?? "")
        case .invalidArgument: .invalidRegistration(token ?? "")
        case .unavailable: .unavailable(retryAfter: retryAfter)
        case .internal: .internalError(retryAfter: retryAfter)
        case .quotaExceeded: .quotaExceeded(retryAfter: retryAfter ?? 60, topics: toTopics)
        }
    }
}

/// The faults a server process holds: test fixtures, not registry data, so they live in memory
/// (a restart forgets them) and apply to the sends this process answers.
final class FaultBoard: Sendable {
    private struct Key: Hashable {
        var project: Int64
        /// `nil`: the project's own fault.
        var token: String?
    }

    private struct State {
        var faults: [Key: InjectedFault] = [:]
        /// Token faults per project: a send asks on its hot path, so it is kept, not counted.
        var tokenFaults: [Int64: Int] = [:]

        mutating func setFault(_ fault: InjectedFault?, for key: Key) {
            let had = faults[key] != nil
            faults[key] = fault
            guard key.token != nil, had != (fault != nil) else { return }
            tokenFaults[key.project, default: 0] += fault == nil ? -1 : 1
            if tokenFaults[key.project] == 0 { tokenFaults[key.project] = nil }
        }
    }

    private let state = Mutex(State())
    /// Tokens with a fault, at most: a fixture table, not a place to store data.
    static let capacity = 10_000

    /// - Returns: `false` when the board is full.
    func set(_ fault: InjectedFault, token: String?, project: Int64) -> Bool {
        state.withLock { state in
            let key = Key(project: project, token: token)
            guard state.faults[key] != nil || state.faults.count < Self.capacity else { return false }
            state.setFault(fault, for: key)
            return true
        }
    }

    /// - Returns: whether there was one.
    func remove(token: String?, project: Int64) -> Bool {
        state.withLock { state in
            let key = Key(project: project, token: token)
            guard state.faults[key] != nil else { return false }
            state.setFault(nil, for: key)
            return true
        }
    }

    /// The fault a send meets, counting it once.
    func take(token: String?, project: Int64) -> InjectedFault? {
        state.withLock { state in
            let key = Key(project: project, token: token)
            guard var fault = state.faults[key] else { return nil }
            if let remaining = fault.remaining {
                fault.remaining = remaining - 1
                state.setFault(remaining > 1 ? fault : nil, for: key)
            }
            return fault
        }
    }

    /// Whether any token of the project has a fault: sends skip the lookups when none does.
    func hasTokenFaults(in project: Int64) -> Bool {
        state.withLock { $0.tokenFaults[project] != nil }
    }
}
