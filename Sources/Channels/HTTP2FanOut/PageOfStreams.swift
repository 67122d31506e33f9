import NIOCore
import NIOHPACK

/// A page's requests and their answers as they come, on the connection's event loop only.
final class PageOfStreams: @unchecked Sendable {
    /// Every request's headers, pseudo-headers first: one list for the page, to which each request
    /// adds only its `content-length`.
    let head: HPACKHeaders
    let bodies: [[UInt8]]
    /// Each request's `:path`, when they differ (in place of the head's).
    let paths: [String]?
    let gate: FanOutGate?
    /// Told each answer as it comes.
    let answered: HTTP2Upstream.Answered?
    private var results: [Result<UpstreamAnswer, any Error>?]
    private var next = 0
    private var done = 0
    private var expired = false
    /// The quota closed: nothing more starts.
    private(set) var halted = false
    /// How long each answered request took, for what counts as a stall.
    private var answerTimes: [Duration] = []
    private let loop: any EventLoop
    let all: EventLoopPromise<[Result<UpstreamAnswer, any Error>]>

    /// The least a request waits, once its page is nearly all answered, before it counts as stalled.
    static let leastStall: Duration = .milliseconds(500)
    /// A stall is this many times the page's median answer time.
    static let stallFactor = 10

    init(
        head: HPACKHeaders, bodies: [[UInt8]], paths: [String]? = nil, loop: any EventLoop, gate: FanOutGate? = nil,
        answered: HTTP2Upstream.Answered? = nil
    ) {
        self.head = head
        self.bodies = bodies
        self.paths = paths
        self.gate = gate
        self.answered = answered
        results = Array(repeating: nil, count: bodies.count)
        self.loop = loop
        all = loop.makePromise()
        if bodies.isEmpty { all.succeed([]) }
    }

    var count: Int { bodies.count }

    /// The headers of the request at `index`: the page's, with its own `:path` when it has one.
    func headers(of index: Int) -> HPACKHeaders {
        guard let paths else { return head }
        var headers = HPACKHeaders()
        headers.reserveCapacity(head.count + 1)
        for (name, value, indexing) in head {
            if name == ":path" {
                headers.add(name: name, value: paths[index], indexing: .nonIndexable)
            } else {
                headers.add(name: name, value: value, indexing: indexing)
            }
        }
        return headers
    }

    /// The page's time is up: nothing more starts, and what is unanswered fails.
    func expire(_ error: any Error) {
        loop.preconditionInEventLoop()
        expired = true
        for index in results.indices where results[index] == nil { _ = complete(index, with: .failure(error)) }
    }

    /// Whether a request may start now; when not, the page stops starting any (the quota closed).
    func mayStart() -> Bool {
        if !halted, gate?.isClosed() == true { halted = true }
        return !halted
    }

    /// An answer closed the quota: no request of the page starts after it.
    func quotaClosed(retryAfter: Int?) {
        halted = true
        gate?.quotaClosed(retryAfter)
    }

    /// The next index to start.
    func take() -> Int {
        loop.preconditionInEventLoop()
        defer { next += 1 }
        return next
    }

    /// Records one answer; returns the next index to start, if any is left. Once the page is
    /// halted, the requests not started yet end as `NotSent`.
    func complete(_ index: Int, with result: Result<UpstreamAnswer, any Error>, took: Duration? = nil) -> Int? {
        loop.preconditionInEventLoop()
        guard results[index] == nil else { return nil }
        results[index] = result
        done += 1
        answered?(index, result)
        // Only answers tell how long the upstream takes; a 429 comes back at once and says nothing of it.
        if let took, case .success(let answer) = result, answer.status != 429 { answerTimes.append(took) }
        if halted {
            while next < results.count {
                let skipped = take()
                results[skipped] = .failure(NotSent())
                done += 1
                answered?(skipped, .failure(NotSent()))
            }
        }
        if done == results.count { all.succeed(results.map { $0! }) }
        return !expired && next < results.count ? take() : nil
    }

    /// How long a request of this page may go unanswered before it counts as stalled: `nil` while
    /// too little of the page is answered to tell a stall from a slow upstream.
    func stallLimit() -> Duration? {
        loop.preconditionInEventLoop()
        // A halted page's requests in flight are not stalled: they wait behind the quota's answer.
        guard !halted, !answerTimes.isEmpty, answerTimes.count >= count - max(1, count / 10) else { return nil }
        answerTimes.sort()
        return max(Self.leastStall, answerTimes[answerTimes.count / 2] * Self.stallFactor)
    }
}
