import ConnectionGuards
import NIOCore
@testable import RegistryServer
import Testing

@Suite("Log throttle")
struct LogThrottleTests {
    @Test("One line per interval, standing for every event held back since the last")
    func countsWhatItHoldsBack() {
        let throttle = LogThrottle(every: .seconds(10))
        let start = NIODeadline.uptimeNanoseconds(1_000_000_000_000)
        #expect(throttle.event(now: start) == 1)
        #expect(throttle.event(now: start + .seconds(1)) == nil)
        #expect(throttle.event(now: start + .seconds(9)) == nil)
        #expect(throttle.event(now: start + .seconds(10)) == 3)
        #expect(throttle.event(now: start + .seconds(11)) == nil)
        #expect(throttle.event(now: start + .seconds(25)) == 2)
    }

    @Test("Each kind of event has its own line and count")
    func kindsApart() {
        let throttle = LogThrottle(every: .seconds(10))
        let start = NIODeadline.uptimeNanoseconds(1_000_000_000_000)
        #expect(throttle.event("header_timeout", now: start) == 1)
        #expect(throttle.event("body_timeout", now: start + .seconds(1)) == 1)
        #expect(throttle.event("header_timeout", now: start + .seconds(2)) == nil)
        #expect(throttle.event("body_timeout", now: start + .seconds(12)) == 1)
        #expect(throttle.event("header_timeout", now: start + .seconds(12)) == 2)
    }
}
