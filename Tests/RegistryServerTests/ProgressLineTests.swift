import RegistryApp
import Synchronization
import Testing

@Suite("Progress lines")
struct ProgressLineTests {
    /// A clock the test moves, and the text the progress line wrote.
    final class Recorder: Sendable {
        let instant = Mutex(ContinuousClock.now)
        let written = Mutex<[String]>([])

        func advance(_ duration: Duration) { instant.withLock { $0 += duration } }

        func line(_ label: String, total: ProgressLine.Total?, display: ProgressLine.Display) -> ProgressLine {
            ProgressLine(
                label, total: total, display: display, now: { self.instant.withLock { $0 } },
                write: { text in self.written.withLock { $0.append(text) } })
        }
    }

    @Test(
        "The text: count, total, share, rate and time left, as far as each is known",
        arguments: [
            (5_000, ProgressLine.Total?.none, 0, Duration.milliseconds(500), "5,000 records"),
            (5_000, nil, 0, .seconds(2), "5,000 records, 2,500/s"),
            (100_000, .count(400_000), 0, .seconds(10), "100,000 of 400,000 records, 25%, 10,000/s, 30s left"),
            (1_234_567, .bytes(1_000), 250, .seconds(100), "1,234,567 records, 25%, 12,346/s, 5m 00s left"),
            (10, .count(5), 0, .seconds(1), "10 of 10 records, 100%, 10/s, 0s left"),
        ])
    func text(count: Int, total: ProgressLine.Total?, bytes: Int, elapsed: Duration, expected: String) {
        #expect(
            ProgressLine.describe(count: count, of: total, bytes: bytes, unit: "records", elapsed: elapsed) == expected)
    }

    @Test("Times left and counts read the same in every locale")
    func units() {
        #expect(ProgressLine.duration(0.6) == "1s")
        #expect(ProgressLine.duration(59) == "59s")
        #expect(ProgressLine.duration(125) == "2m 05s")
        #expect(ProgressLine.duration(3 * 3600 + 7 * 60 + 30) == "3h 07m")
        #expect(ProgressLine.grouped(0) == "0")
        #expect(ProgressLine.grouped(999) == "999")
        #expect(ProgressLine.grouped(1_000) == "1,000")
        #expect(ProgressLine.grouped(12_345_678) == "12,345,678")
    }

    @Test("Off a terminal: nothing for the first ten seconds, then one plain line every ten seconds")
    func logLines() {
        let recorder = Recorder()
        var progress = recorder.line("copy", total: .count(1_000), display: .log)
        progress.update(count: 10)
        recorder.advance(.seconds(9))
        progress.update(count: 90)
        #expect(recorder.written.withLock { $0 }.isEmpty)
        recorder.advance(.seconds(1))
        progress.update(count: 100)
        recorder.advance(.seconds(5))
        progress.update(count: 150)
        recorder.advance(.seconds(5))
        progress.update(count: 200)
        progress.end()
        #expect(
            recorder.written.withLock { $0 } == [
                "copy: 100 of 1,000 records, 10%, 10/s, 1m 30s left\n",
                "copy: 200 of 1,000 records, 20%, 10/s, 1m 20s left\n",
            ])
    }

    @Test("On a terminal: one line redrawn at most ten times a second, with a bar, and cleared at the end")
    func terminal() {
        let recorder = Recorder()
        var progress = recorder.line("import", total: .bytes(100), display: .terminal)
        progress.update(count: 1, bytes: 50)
        recorder.advance(.milliseconds(50))
        progress.update(count: 2, bytes: 60)
        progress.end()
        let written = recorder.written.withLock { $0 }
        #expect(written.count == 2)
        #expect(written.first == "\r\u{1B}[2Kimport [###############...............] 1 records, 50%")
        #expect(written.last == "\r\u{1B}[2K")
    }
}
