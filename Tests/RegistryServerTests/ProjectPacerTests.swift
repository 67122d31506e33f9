@testable import Delivery
import Testing

/// The relay's pause per project: reported once however many streams meet it, and sending after
/// it starts with one request.
struct ProjectPacerTests {
    @Test func aPauseIsReportedOnceAndStartsSlow() {
        let pacer = ProjectPacer(fullRound: 16)
        #expect(pacer.admit(1, wanting: 500) == 500)
        #expect(pacer.pause(1, for: .seconds(30)))
        // Every other stream refused at once reports the same pause: not news.
        #expect(!pacer.pause(1, for: .seconds(30)))
        #expect(pacer.isPaused(1))
        #expect(pacer.takePauseReport(1) != nil)
        #expect(pacer.takePauseReport(1) == nil)
        // A longer pause is news again.
        #expect(pacer.pause(1, for: .seconds(90)))
        // After the pause: one probe, then twice as many each round answered without a 429.
        #expect(pacer.admit(1, wanting: 500) == 1)
        pacer.grow(1, after: 1)
        #expect(pacer.admit(1, wanting: 500) == 2)
        pacer.grow(1, after: 2)
        pacer.grow(1, after: 4)
        #expect(pacer.admit(1, wanting: 500) == 8)
        // A round smaller than its allowance (a message's last recipients) proves nothing more.
        pacer.grow(1, after: 3)
        #expect(pacer.admit(1, wanting: 500) == 8)
        pacer.grow(1, after: 8)
        #expect(pacer.admit(1, wanting: 500) == 500)
        #expect(!pacer.isPaused(2))
    }
}
