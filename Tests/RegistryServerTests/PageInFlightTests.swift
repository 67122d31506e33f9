@testable import Delivery
import Registry
import Testing

/// How a page in flight is cut into slices the engine records before the page ends: the walk's
/// cursor moves only past outcomes that are written, and carries the recipients found gone.
struct PageInFlightTests {
    /// Two retries, then four walked recipients (ids 10, 12, 15, 20); the walk found 11, 16 and 21
    /// gone and read up to 22.
    static let page = AttemptPage(
        attempts: [
            DeliveryAttempt(token: "r1", tokenID: 3, attempts: 1, deliveryID: 100),
            DeliveryAttempt(token: "r2", tokenID: nil, attempts: 2, deliveryID: 101),
            DeliveryAttempt(token: "w10", tokenID: 10, attempts: 0, deliveryID: nil),
            DeliveryAttempt(token: "w12", tokenID: 12, attempts: 0, deliveryID: nil),
            DeliveryAttempt(token: "w15", tokenID: 15, attempts: 0, deliveryID: nil),
            DeliveryAttempt(token: "w20", tokenID: 20, attempts: 0, deliveryID: nil),
        ],
        alreadyGone: [
            DeliveryAttempt(token: "g11", tokenID: 11, attempts: 0, deliveryID: nil),
            DeliveryAttempt(token: "g16", tokenID: 16, attempts: 0, deliveryID: nil),
            DeliveryAttempt(token: "g21", tokenID: 21, attempts: 0, deliveryID: nil),
        ],
        cursor: 22, walked: false)

    func deliver(_ index: Int, of page: PageInFlight) {
        page.arrived(
            index, DeliveryOutcome(attempt: page.page.attempts[index], state: .delivered, error: nil, nextAttemptAt: nil),
            answer: .answered(.delivered))
    }

    @Test func aSliceIsTheAnsweredPrefixAndItsCursorStopsBeforeTheFirstWalkedOneLeftOut() async throws {
        let inFlight = PageInFlight(Self.page, gone: "UNREGISTERED")
        for index in [0, 1, 2, 4] { deliver(index, of: inFlight) }  // 3 is still out
        let first = try #require(await inFlight.nextSlice())
        #expect(first.page.attempts.map(\.token) == ["r1", "r2", "w10"])
        #expect(first.page.cursor == 11)  // just before w12, which is not recorded yet
        #expect(first.page.walked == false)
        #expect(first.outcomes.map(\.attempt.token) == ["g11", "r1", "r2", "w10"])
        for index in [3, 5] { deliver(index, of: inFlight) }
        let second = try #require(await inFlight.nextSlice())
        #expect(second.page.attempts.map(\.token) == ["w12", "w15", "w20"])
        #expect(second.page.cursor == 22)
        #expect(second.outcomes.prefix(2).map(\.attempt.token) == ["g16", "g21"])
        inFlight.end()
        #expect(await inFlight.nextSlice() == nil)
        #expect(inFlight.rest().0 == nil)
    }

    func holdBack(_ index: Int, of page: PageInFlight) {
        page.arrived(
            index,
            DeliveryOutcome(
                attempt: page.page.attempts[index], state: .pending, error: "QUOTA_EXCEEDED", nextAttemptAt: nil,
                sent: false),
            answer: .notSent)
    }

    @Test func requestsAtTheEndThatNeverWentOutAreLeftToBeReadAgain() async throws {
        let inFlight = PageInFlight(Self.page, gone: "UNREGISTERED")
        for index in 0..<4 { deliver(index, of: inFlight) }
        for index in 4..<6 { holdBack(index, of: inFlight) }
        // Every outcome is in, but no slice takes the ones never sent at the end.
        let slice = try #require(await inFlight.nextSlice())
        #expect(slice.page.attempts.map(\.token) == ["r1", "r2", "w10", "w12"])
        #expect(slice.page.cursor == 14)  // w15 and the gone g16 are walked again
        #expect(slice.page.alreadyGone.map(\.token) == ["g11"])
        inFlight.end()
        let (rest, cutShort) = inFlight.rest()
        #expect(cutShort)
        #expect(rest == nil)
    }

    @Test func requestsNeverSentInTheMiddleGoWithTheSliceThatPassesThem() async throws {
        let inFlight = PageInFlight(Self.page, gone: "UNREGISTERED")
        for index in [0, 1, 3, 4, 5] { deliver(index, of: inFlight) }
        holdBack(2, of: inFlight)
        let slice = try #require(await inFlight.nextSlice())
        #expect(slice.page.attempts.count == 6)
        #expect(slice.outcomes.filter { !$0.sent }.map(\.attempt.token) == ["w10"])
    }

    @Test func anAnswerArrivingWhileTheSliceIsPlannedIsTakenWithinItsInterval() async throws {
        let inFlight = PageInFlight(Self.page, gone: "UNREGISTERED")
        let taken = Task { await inFlight.nextSlice() }
        try await Task.sleep(for: .milliseconds(20))
        deliver(0, of: inFlight)
        // Not the page's end: the slice is due 5 ms after the answer, not when the page ends.
        let slice = try #require(await taken.value)
        #expect(slice.page.attempts.map(\.token) == ["r1"])
        inFlight.end()
    }

    @Test func aPageNoOneAnsweredGivesNoSlice() async {
        let inFlight = PageInFlight(Self.page, gone: "UNREGISTERED")
        for (index, attempt) in Self.page.attempts.enumerated() {
            inFlight.arrived(
                index, DeliveryOutcome(attempt: attempt, state: .pending, error: "UNAVAILABLE", nextAttemptAt: nil),
                answer: .unanswered)
        }
        Task { try? await Task.sleep(for: .milliseconds(50)); inFlight.end() }
        #expect(await inFlight.nextSlice() == nil)
    }
}
