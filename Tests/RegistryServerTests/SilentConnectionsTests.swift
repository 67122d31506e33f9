@testable import ConnectionGuards
import Logging
import NIOCore
import NIOEmbedded
@testable import RegistryServer
import Testing

/// Making room, on channels of an embedded event loop whose clock the test moves. Synchronous:
/// an embedded loop must be driven from the thread that made it.
@Suite("Silent connections")
struct SilentConnectionsTests {
    /// Silent connections closing at most one every `spacing`, three silent connections on one
    /// loop, and the moment they fell silent.
    private func silentChannels(
        spacing: TimeAmount
    ) throws -> (SilentConnections, [EmbeddedChannel], EmbeddedEventLoop, NIODeadline) {
        let silent = SilentConnections(spacing: spacing, logger: Logger(label: "test"))
        let loop = EmbeddedEventLoop()
        let channels = try (1...3).map { port in
            let channel = EmbeddedChannel(loop: loop)
            channel.connect(to: try SocketAddress(ipAddress: "127.0.0.1", port: port), promise: nil)
            return channel
        }
        channels.forEach(silent.fellSilent)
        return (silent, channels, loop, loop.now)
    }

    @Test("The connection silent longest gives way once silent for a second, the next one spacing later")
    func oneAtATime() throws {
        let (silent, channels, loop, since) = try silentChannels(spacing: .seconds(5))
        silent.wantRoom()
        silent.wantRoom()

        loop.advanceTime(to: since + .milliseconds(900))
        #expect(channels.map(\.isActive) == [true, true, true])
        loop.advanceTime(to: since + .milliseconds(1100))
        #expect(channels.map(\.isActive) == [false, true, true])
        loop.advanceTime(to: since + .milliseconds(5900))
        #expect(channels.map(\.isActive) == [false, true, true])
        loop.advanceTime(to: since + .milliseconds(6100))
        #expect(channels.map(\.isActive) == [false, false, true])
        // Two were wanted, two gave way: the third stays.
        loop.advanceTime(to: since + .seconds(60))
        #expect(channels.map(\.isActive) == [false, false, true])
    }

    @Test("A connection that spoke, or room no longer wanted, is left alone")
    func spokeOrEnough() throws {
        let (silent, channels, loop, since) = try silentChannels(spacing: .zero)
        silent.spoke(channels[0])
        silent.wantRoom()
        loop.advanceTime(to: since + .seconds(2))
        #expect(channels.map(\.isActive) == [true, false, true])

        silent.wantRoom()
        silent.enoughRoom()
        loop.advanceTime(to: since + .seconds(60))
        #expect(channels.map(\.isActive) == [true, false, true])
    }

    @Test("The one due next speaks while the closes are spaced: the next silent one gives way in its place")
    func spokeWhileWaiting() throws {
        let (silent, channels, loop, since) = try silentChannels(spacing: .seconds(5))
        silent.wantRoom()
        silent.wantRoom()
        loop.advanceTime(to: since + .seconds(2))
        #expect(channels.map(\.isActive) == [false, true, true])
        silent.spoke(channels[1])
        loop.advanceTime(to: since + .seconds(7))
        #expect(channels.map(\.isActive) == [false, true, false])
    }

    @Test("Room wanted is capped: more newcomers than the cap close no more than the cap")
    func wantedIsCapped() throws {
        let (silent, channels, loop, since) = try silentChannels(spacing: .zero)
        for _ in 1...3 { silent.wantRoom(atMost: 1) }
        loop.advanceTime(to: since + .seconds(60))
        #expect(channels.map(\.isActive) == [false, true, true])
    }

    @Test(
        "Spacing: the header timeout over the connection limit, a tenth of a second at most",
        arguments: [
            (Duration.seconds(10), 4096, TimeAmount.nanoseconds(2_441_406)),
            (.seconds(10), 896, .nanoseconds(11_160_714)),
            (.seconds(600), 3, .milliseconds(100)),
        ])
    func spacing(headerTimeout: Duration, maximum: Int, expected: TimeAmount) {
        #expect(SilentConnections.spacing(headerTimeout: headerTimeout, maximumConnections: maximum) == expected)
    }
}
