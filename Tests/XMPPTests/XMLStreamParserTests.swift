import Testing
import XMPP

/// Feeds `text` in chunks of `chunk` bytes and collects every event.
private func events(_ text: String, chunk: Int = .max, limits: XMLStreamParser.Limits = .init()) throws(XMLStreamError)
    -> [XMLStreamEvent]
{
    var parser = XMLStreamParser(limits: limits)
    var events: [XMLStreamEvent] = []
    let bytes = Array(text.utf8)
    var start = 0
    repeat {
        let end = min(bytes.count, start + chunk)
        parser.append(bytes[start..<end])
        while let event = try parser.next() { events.append(event) }
        start = end
    } while start < bytes.count
    return events
}

private func failure(_ text: String, limits: XMLStreamParser.Limits = .init()) -> XMLStreamError? {
    do {
        _ = try events(text, limits: limits)
        return nil
    } catch {
        return error
    }
}

private struct Unexpected: Error {}

/// Input XMPP forbids, and the stream error it earns.
private let forbidden: [(String, XMLStreamError.Condition)] = [
    (#"<!DOCTYPE lolz [<!ENTITY lol "lol">]>"#, .restrictedXML),
    (header + "<message>&lol;</message>", .restrictedXML),
    (header + "<!-- hello -->", .restrictedXML),
    (header + "<message><!ENTITY x SYSTEM 'file:///etc/passwd'></message>", .restrictedXML),
    (header + "<?php echo 1; ?>", .restrictedXML),
    (header + "<message></iq>", .notWellFormed),
    (header + "hello", .notWellFormed),
    (header + "<message a='1' a='2'/>", .notWellFormed),
    (header + "<x:message/>", .notWellFormed),
    (header + "<message a=1/>", .notWellFormed),
    (header + "<message>\u{01}</message>", .notWellFormed),
    (header + "<message>&#0;</message>", .notWellFormed),
    (header + "<>x</>", .notWellFormed),
    (header + "< message/>", .notWellFormed),
    (header + "<message xmlns:=''/>", .notWellFormed),
    (header + "<message>&#+65;</message>", .notWellFormed),
    (header + "<message>&#x+41;</message>", .notWellFormed),
    ("<html>", .invalidNamespace),
]

private let header =
    #"<?xml version='1.0'?><stream:stream to="gcm.googleapis.com" version="1.0" xmlns="jabber:client" xmlns:stream="http://etherx.jabber.org/streams">"#

@Suite("XML stream parser")
struct XMLStreamParserTests {
    @Test("The stream header, a stanza and the end of the stream, however the bytes are split", arguments: [1, 2, 7, 64, Int.max])
    func wholeStream(chunk: Int) throws {
        let text =
            header + "\n  <message id=\"3\"><gcm xmlns=\"google:mobile:data\">{&quot;to&quot;: &apos;x&apos;, \"a\":\"&lt;&amp;&gt;\"}</gcm></message> </stream:stream>"
        let got = try events(text, chunk: chunk)
        #expect(got.count == 3)
        guard case .streamOpened(let opened) = got[0], case .stanza(let message) = got[1] else {
            Issue.record("unexpected events \(got)")
            return
        }
        #expect(opened.attribute("to") == "gcm.googleapis.com")
        #expect(message.name == "message")
        #expect(message.namespace == "jabber:client")
        #expect(message.attribute("id") == "3")
        let gcm = try #require(message.child("gcm", namespace: "google:mobile:data"))
        #expect(gcm.text == #"{"to": 'x', "a":"<&>"}"#)
        #expect(got[2] == .streamClosed)
    }

    @Test("Prefixed namespaces resolve: data:gcm is gcm in google:mobile:data")
    func prefixes() throws {
        let got = try events(header + #"<message><data:gcm xmlns:data="google:mobile:data">{}</data:gcm></message>"#)
        guard case .stanza(let message) = got.last else { throw Unexpected() }
        #expect(message.child("gcm", namespace: "google:mobile:data")?.name == "data:gcm")
    }

    @Test("CDATA, character references and self-closing elements")
    func characterData() throws {
        let got = try events(
            header + #"<iq type='get' id="c2s1"><ping xmlns='urn:xmpp:ping'/></iq><message><body><![CDATA[a<b&c]]>&#x41;&#66;</body></message>"#)
        guard case .stanza(let iq) = got[1], case .stanza(let message) = got[2] else {
            Issue.record("unexpected events \(got)")
            return
        }
        #expect(iq.attribute("type") == "get")
        #expect(iq.child("ping", namespace: "urn:xmpp:ping") != nil)
        #expect(message.child("body")?.text == "a<b&cAB")
    }

    @Test("After restart, a new stream header is expected (SASL success)")
    func restart() throws {
        var parser = XMLStreamParser()
        parser.append(Array((header + "<auth/>" + header + "<iq/>").utf8))
        #expect(try parser.next() != nil)
        guard case .stanza(let auth)? = try parser.next() else { throw Unexpected() }
        #expect(auth.name == "auth")
        parser.restart()
        guard case .streamOpened? = try parser.next() else { throw Unexpected() }
        guard case .stanza(let iq)? = try parser.next() else { throw Unexpected() }
        #expect(iq.name == "iq")
    }

    @Test("What XMPP forbids is refused with the right stream error", arguments: forbidden)
    func refused(text: String, condition: XMLStreamError.Condition) {
        #expect(failure(text)?.condition == condition)
    }

    @Test("Invalid UTF-8 is not well-formed")
    func invalidUTF8() throws {
        var parser = XMLStreamParser()
        parser.append(Array(header.utf8) + Array("<message>".utf8) + [0xC3, 0x28] + Array("</message>".utf8))
        _ = try parser.next()
        #expect(throws: XMLStreamError.self) { try parser.next() }
    }

    @Test("Stanzas are bounded in bytes, depth and attributes; whitespace between them is not counted")
    func limits() throws {
        var limits = XMLStreamParser.Limits(stanzaBytes: 1024)
        limits.depth = 4
        limits.attributes = 4
        #expect(failure(header + "<message>" + String(repeating: "a", count: 1100) + "</message>", limits: limits)?.condition == .policyViolation)
        #expect(failure(header + "<a><b><c><d><e/></d></c></b></a>", limits: limits)?.condition == .policyViolation)
        #expect(failure(header + "<a v='0' w='1' x='2' y='3' z='4'/>", limits: limits)?.condition == .policyViolation)
        let spaced = header + String(repeating: " ", count: 5000) + "<a/>" + String(repeating: "\n", count: 5000) + "<a/>"
        #expect(try events(spaced, chunk: 100, limits: limits).count == 3)
    }

    @Test("Text split by CDATA sections is one text node, built in linear time")
    func textRuns() throws {
        let pieces = String(repeating: "ab<![CDATA[<c>]]>", count: 2000)
        let got = try events(header + "<message><body>" + pieces + "</body></message>", chunk: 3)
        guard case .stanza(let message) = got[1] else { throw Unexpected() }
        let body = try #require(message.child("body"))
        #expect(body.children.count == 1)
        #expect(body.text == String(repeating: "ab<c>", count: 2000))
    }

    @Test("Each element counts against the stanza budget beyond its bytes")
    func elementCharge() {
        let flat = header + "<m>" + String(repeating: "<a/>", count: 600) + "</m>"
        #expect(failure(flat, limits: .init(stanzaBytes: 16 * 1024)) != nil)
        #expect(failure(flat, limits: .init(stanzaBytes: 64 * 1024)) == nil)
    }

    @Test("An error sticks: later calls throw it again")
    func sticky() {
        var parser = XMLStreamParser()
        parser.append(Array("<html>".utf8))
        #expect(throws: XMLStreamError.self) { try parser.next() }
        parser.append(Array(header.utf8))
        #expect(throws: XMLStreamError.self) { try parser.next() }
    }

    @Test("Bytes split at every position give the same events", arguments: Array(1...12))
    func everySplit(chunk: Int) throws {
        let text = header + #"<message id='a&amp;b'><gcm xmlns="google:mobile:data"><![CDATA[{"k":"]]]]>x"}]]></gcm></message></stream:stream>"#
        #expect(try events(text, chunk: chunk) == (try events(text)))
    }

    @Test("A stanza written back is read again as the same element")
    func roundTrip() throws {
        let got = try events(header + #"<message id="q&quot;" to="a&lt;b"><gcm xmlns="google:mobile:data">{"a":"&lt;&amp;"}</gcm></message>"#)
        guard case .stanza(let message) = got[1] else { throw Unexpected() }
        let again = try events(header + message.xml)
        #expect(again[1] == .stanza(message))
    }
}
