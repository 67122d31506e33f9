import Foundation
import Testing
import XMPP

@Suite("SASL credentials")
struct SASLCredentialsTests {
    private func encode(_ authzid: String, _ authcid: String, _ secret: String) -> String {
        Data("\(authzid)\0\(authcid)\0\(secret)".utf8).base64EncodedString()
    }

    @Test(
        "Every client's spelling of the sender id (XMPP reference §2)",
        arguments: [
            ("123456789@gcm.googleapis.com", "123456789", "123456789"),  // xmpppy
            ("", "123456789", "123456789"),  // slixmpp, aiofcm, go-gcm
            ("", "123456789@gcm.googleapis.com", "123456789"),  // Smack
            ("", "123456789@fcm.googleapis.com", "123456789"),  // node-xcs
            ("123456789@projects.gcm.android.com", "garbled", "123456789"),  // ccs.jd
            ("", "123456789@gcm.googleapis.com/app", "123456789"),
        ])
    func spellings(authzid: String, authcid: String, sender: String) throws {
        let credentials = try #require(SASLCredentials(base64: encode(authzid, authcid, "KEY")))
        #expect(credentials.senderID == sender)
        #expect(credentials.secret == "KEY")
    }

    @Test(
        "Refused identities",
        arguments: [("", "alice"), ("", "123@example.com"), ("111@gcm.googleapis.com", "222"), ("", "")])
    func refused(authzid: String, authcid: String) throws {
        let credentials = try #require(SASLCredentials(base64: encode(authzid, authcid, "KEY")))
        #expect(credentials.senderID == nil)
    }

    @Test("Not base64, or not three NUL-separated parts")
    func malformed() {
        #expect(SASLCredentials(base64: "not base64!") == nil)
        #expect(SASLCredentials(base64: Data("123\0KEY".utf8).base64EncodedString()) == nil)
        #expect(SASLCredentials(base64: "=") == nil)
    }
}
