import AudienceEngine

extension RegistryService {
    /// Runs `body` on the threads costly requests run on (`CostlyWork`), off those that answer
    /// every other request: for a front end's work that grows with its input, such as checking a
    /// long condition, so that the front end need not know where those threads are.
    public func runCostly<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await CostlyWork.run(body)
    }
}
