@testable import Delivery
import Testing

/// The channels a server holds, by name: found by the name a project's settings give, and an
/// unknown name said in plain words rather than guessed.
@Suite struct ChannelRegistryTests {
    @Test func aChannelIsFoundByItsNameAndAnUnknownNameIsSaid() throws {
        let scripted = ScriptedChannel()
        let channels = ChannelRegistry([scripted])
        #expect(channels.names == ["fcm-v1"])
        #expect(try channels.channel(named: "fcm-v1") as? ScriptedChannel === scripted)
        #expect(channels.first as? ScriptedChannel === scripted)
        let unknown = UnknownChannel(name: "carrier-pigeon", known: ["fcm-v1"])
        #expect(throws: unknown) { try channels.channel(named: "carrier-pigeon") }
        #expect("\(unknown)" == "no channel named carrier-pigeon on this server, which delivers through fcm-v1")
    }
}
