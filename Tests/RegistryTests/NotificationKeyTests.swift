import Foundation
import Registry
import Testing

@Suite("Notification keys")
struct NotificationKeyTests {
    let codec = NotificationKeyCodec(secret: NotificationKeyCodec.makeSecret())
    let project = Project(rowID: 1, projectId: "a", senderId: "1")
    let other = Project(rowID: 2, projectId: "b", senderId: "2")

    @Test("Keys look like FCM's: APA91b, URL-safe base64, no ':', about 120 characters")
    func shape() {
        let key = codec.issue(groupID: 42, in: project)
        #expect(key.hasPrefix("APA91b"))
        #expect((110...140).contains(key.count))
        #expect(!key.contains(":"))
        #expect(
            key.utf8.allSatisfy { byte in
                (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                    || (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte)
                    || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || byte == UInt8(ascii: "-")
                    || byte == UInt8(ascii: "_")
            })
    }

    @Test("Every issue is a fresh string, and every one resolves to the group")
    func freshAndResolving() throws {
        let keys = (0..<20).map { _ in codec.issue(groupID: 7, in: project) }
        #expect(Set(keys).count == keys.count)
        for key in keys {
            #expect(try codec.groupID(from: key, in: project) == 7)
        }
    }

    @Test("A key does not open in another project, with another secret, or when altered")
    func unforgeable() {
        let key = codec.issue(groupID: 7, in: project)
        #expect(throws: RegistryError.undecryptableKey) { try codec.groupID(from: key, in: other) }
        let stranger = NotificationKeyCodec(secret: NotificationKeyCodec.makeSecret())
        #expect(throws: RegistryError.undecryptableKey) { try stranger.groupID(from: key, in: project) }
        var altered = Array(key)
        altered[40] = altered[40] == "A" ? "B" : "A"
        #expect(throws: RegistryError.undecryptableKey) { try codec.groupID(from: String(altered), in: project) }
        for garbage in [
            "", "APA91b", "APA91bGHXQBB9QgnYOEURwm0I3lmyqzk2TXQ", "not a key", "APA91b+/+/",
            String(repeating: "A", count: 10_000),
        ] {
            #expect(throws: RegistryError.undecryptableKey) { try codec.groupID(from: garbage, in: project) }
        }
    }
}
