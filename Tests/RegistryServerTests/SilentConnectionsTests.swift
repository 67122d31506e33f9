import Logging
import NIOCore
import NIOEmbedded
import Testing

@testable import RegistryServer

/// Making room, on channels of an embedded event loop whose clock the test moves.
@Suite("Silent connections")
struct SilentConnectionsTests {
    /// Three silent connections on one loop, and the moment they fell silent.
    private func silentChannels(_ silent: SilentConnections) async throws -> ([EmbeddedChannel], EmbeddedEventLoop, NIODeadline) {
        let loop = EmbeddedEventLoop()
        var channels: [EmbeddedChannel] = []
        for port in 1...3 {
            let channel = EmbeddedChannel(loop: loop)
            try await channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: port)).get()
            channels.append(channel)
        }
        channels.forEach(silent.fellSilent)
        return (channels, loop, loop.now)
    }

    @Test("The connection silent longest gives way once silent for a second, the next one spacing later")
    func oneAtATime() async throws {
        let silent = SilentConnections(spacing: .seconds(5), logger: Logger(label: "test"))
        let (channels, loop, since) = try await silentChannels(silent)
        silent.wantRoom()
        silent.wantRoom()

        loop.advanceTime(to: since + .milliseconds(900))
        #expect(channels.map(\.isActive) == [true, true, true])
        loop.advanceTime(to: since + .milliseconds(1100))
        #expect(channels.map(\.isActive) == [false, true, true])
        loop.advanceTime(to: since + .milliseconds(5900))
        #expect(channels.map(\.isActive) == [false, true, true])
        loop.advanceTime(to: since + .milliseconds(6200))
        #expect(channels.map(\.isActive) == [false, false, true])
        // Two were wanted, two gave way: the third stays.
        loop.advanceTime(to: since + .seconds(60))
        #expect(channels.map(\.isActive) == [false, false, true])
    }

    @Test("A connection that spoke, or room no longer wanted, is left alone")
    func spokeOrEnough() async throws {
        let silent = SilentConnections(spacing: .zero, logger: Logger(label: "test"))
        let (channels, loop, since) = try await silentChannels(silent)
        silent.spoke(channels[0])
        silent.wantRoom()
        loop.advanceTime(to: since + .seconds(2))
        #expect(channels.map(\.isActive) == [true, false, true])

        silent.wantRoom()
        silent.enoughRoom()
        loop.advanceTime(to: since + .seconds(60))
        #expect(channels.map(\.isActive) == [true, false, true])
    }
}
