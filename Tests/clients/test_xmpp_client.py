"""Unmodified XMPP clients from PyPI against fcm-registry's XMPP connection server (CCS).

* aiofcm, an FCM XMPP client built on aioxmpp, is set up exactly as for Google: a sender id and a
  server key, nothing else. It dials fcm-xmpp.googleapis.com:5235 with TLS from the first byte and
  checks the certificate against gcm.googleapis.com; run-xmpp-client.sh maps those names to the
  server in a hosts file private to the test and trusts the CA of `tls init` through SSL_CERT_FILE.
  aiofcm's API only sends downstream messages and reads their ACK/NACK; receipts and upstream
  messages reach its aioxmpp stream, where this test observes them (an inbound filter that passes
  every stanza on unchanged) and acknowledges them with aiofcm's own <gcm> element.
* slixmpp, a generic XMPP library, with direct TLS (no STARTTLS) to FCM_REGISTRY_XMPP_HOST:PORT and
  a <gcm xmlns="google:mobile:data"> stanza plugin defined here, as a CCS app server would write it.

Each client logs in with the sender id and server key, sends downstream messages (ACK, NACK, a
delivery receipt), receives an upstream message injected through the native HTTP API and ACKs it.
The XML each library sends and receives is logged at debug level and shown when a test fails.
"""
import asyncio
import json
import logging
import os
import socket
import ssl
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

BASE_URL = os.environ["FCM_REGISTRY_URL"].rstrip("/")
SERVER_KEY = os.environ["FCM_REGISTRY_KEY"]
SENDER_ID = os.environ["FCM_REGISTRY_SENDER_ID"]
XMPP_HOST = os.environ.get("FCM_REGISTRY_XMPP_HOST", "127.0.0.1")
XMPP_PORT = int(os.environ.get("FCM_REGISTRY_XMPP_PORT", "5235"))
CA_FILE = os.environ["FCM_REGISTRY_CA"]
TIMEOUT = 10


# --- The native HTTP API -------------------------------------------------------------------------

def api(method, path, body=None):
    """One call to the server's HTTP API with the server key; returns the decoded JSON body."""
    request = urllib.request.Request(
        BASE_URL + path, method=method,
        data=None if body is None else json.dumps(body).encode(),
        headers={"Authorization": f"key={SERVER_KEY}", "Content-Type": "application/json"})
    context = ssl.create_default_context(cafile=CA_FILE) if BASE_URL.startswith("https:") else None
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT, context=context) as response:
            return json.loads(response.read() or b"{}")
    except urllib.error.HTTPError as error:
        raise AssertionError(f"{method} {path}: HTTP {error.code}: {error.read().decode(errors='replace')}")


async def call(method, path, body=None):
    return await asyncio.to_thread(api, method, path, body)


def token(tag):
    return f"{tag}xxxxxxxxxxxxxxxxxx:APA91b" + "X" * 40


def register(*tokens):
    """Makes the tokens known to the project (they subscribe to a topic)."""
    api("POST", "/iid/v1:batchAdd", {"to": "/topics/xmpp-clients", "registration_tokens": list(tokens)})


def sessions():
    return api("GET", "/api/xmpp/connections")


async def wait_for(predicate, what, timeout=TIMEOUT):
    """Polls the connection list until `predicate(list)` holds; returns that list."""
    deadline = time.monotonic() + timeout
    while True:
        listing = await asyncio.to_thread(sessions)
        if predicate(listing):
            return listing
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}; GET /api/xmpp/connections: {listing}")
        await asyncio.sleep(0.05)


def unacked_upstream(listing, connection):
    [session] = [s for s in listing["connections"] if s["id"] == connection]
    return session["unackedUpstream"]


def xmpp_messages(tok):
    return [m for m in api("GET", f"/api/tokens/{tok}/messages")["messages"] if m["protocol"] == "xmpp"]


@pytest.fixture(autouse=True)
def no_other_session():
    """Upstream messages go to any of the project's sessions: each test must have the server to
    itself, with no session left from the one before and nothing waiting."""
    deadline = time.monotonic() + TIMEOUT
    while (listing := sessions())["connections"] or listing["waitingUpstream"]:
        assert time.monotonic() < deadline, f"sessions left from an earlier test: {listing}"
        time.sleep(0.05)
    yield


class Inbox:
    """Every CCS JSON payload a client received, by message_id, with the stanza's attributes."""

    def __init__(self):
        self.received = {}
        self.waiters = {}

    def put(self, payload, attributes):
        message_id = payload.get("message_id")
        self.received[message_id] = (payload, attributes)
        waiter = self.waiters.pop(message_id, None)
        if waiter and not waiter.done():
            waiter.set_result((payload, attributes))

    async def get(self, message_id):
        if message_id in self.received:
            return self.received[message_id]
        waiter = self.waiters[message_id] = asyncio.get_running_loop().create_future()
        try:
            return await asyncio.wait_for(waiter, TIMEOUT)
        except asyncio.TimeoutError:
            raise AssertionError(f"no message {message_id!r} from the server; received: {self.received}")


def check_receipt(receipt, attributes, original_id, tok):
    """A delivery receipt as CCS sends it (reference §5.4)."""
    assert attributes["type"] == "normal" and attributes["from"] == "devices@gcm.googleapis.com", attributes
    assert receipt["message_type"] == "receipt", receipt
    assert receipt["message_id"] == "dr2:" + original_id, receipt
    assert receipt["data"]["message_status"] == "MESSAGE_SENT_TO_DEVICE", receipt
    assert receipt["data"]["original_message_id"] == original_id, receipt
    assert receipt["data"]["device_registration_id"] == tok, receipt
    assert receipt["data"]["message_sent_timestamp"].isdigit(), receipt
    assert receipt["category"] and receipt["from"], receipt


def check_upstream(upstream, attributes, message_id, tok, data):
    """An upstream message: no message_type, and the four fields every client needs (§5.3)."""
    assert attributes["type"] == "normal" and attributes["from"] == "devices@gcm.googleapis.com", attributes
    assert attributes["to"].split("/")[0] == f"{SENDER_ID}@gcm.googleapis.com", attributes
    assert upstream == {"category": "com.example.app", "data": data, "from": tok, "message_id": message_id}, upstream


# --- aiofcm --------------------------------------------------------------------------------------

def test_aiofcm():
    import aioxmpp
    from aiofcm import FCM, Message
    from aiofcm.connection import FCMMessage, FCMXMPPConnection

    # aiofcm silences aioxmpp; its XML (SENT/RECV) is what a failure report needs.
    logging.getLogger("aioxmpp").setLevel(logging.DEBUG)
    # aiofcm dials this host, whatever the test does: make sure it is the server, not Google.
    host = FCMXMPPConnection.FCM_HOST
    assert socket.gethostbyname(host).startswith("127."), \
        f"{host} must resolve to the test server (run through run-xmpp-client.sh)"
    assert FCMXMPPConnection.FCM_PORT == XMPP_PORT

    class ReceiptMessage(Message):
        """aiofcm's Message has no delivery_receipt_requested field; this one adds it."""
        __slots__ = ()

        def as_dict(self):
            return {**super().as_dict(), "delivery_receipt_requested": True}

    tok, unknown = token("aiofcm1"), token("aiofcm9")
    register(tok)

    async def scenario():
        fcm = FCM(int(SENDER_ID), SERVER_KEY, max_connections=1, max_connection_attempts=1)
        inbox = Inbox()
        try:
            await fcm.pool.create_connection()
            [connection] = fcm.pool.connections
            stream = connection.xmpp_client.stream

            def observe(stanza):
                if isinstance(stanza, aioxmpp.Message) and stanza.fcm_payload is not None:
                    inbox.put(json.loads(stanza.fcm_payload.text), {
                        "type": stanza.type_.value, "from": str(stanza.from_) if stanza.from_ else None,
                        "to": str(stanza.to) if stanza.to else None})
                return stanza
            stream.app_inbound_message_filter.register(observe, 0)

            async def ack(payload):
                stanza = aioxmpp.Message(type_=aioxmpp.MessageType.NORMAL)
                stanza.fcm_payload = FCMMessage()
                stanza.fcm_payload.text = json.dumps(
                    {"to": payload["from"], "message_id": payload["message_id"], "message_type": "ack"})
                await stream.send(stanza)

            # Downstream to a registered token: ACK.
            response = await fcm.send_message(Message(tok, data={"score": "5x1"}, message_id="aiofcm-m1"))
            assert (response.status, response.description) == ("SUCCESS", None)
            ack_json, _ = await inbox.get("aiofcm-m1")
            assert ack_json == {"from": tok, "message_id": "aiofcm-m1", "message_type": "ack"}

            # Downstream to an unknown token: NACK, with the error_description aiofcm reads.
            response = await fcm.send_message(Message(unknown, data={"a": "b"}, message_id="aiofcm-m2"))
            assert response.status == "DEVICE_UNREGISTERED" and response.description, \
                (response.status, response.description)
            nack, _ = await inbox.get("aiofcm-m2")
            assert nack["message_type"] == "nack" and nack["from"] == unknown, nack

            # A delivery receipt, which aiofcm's API ignores: the app ACKs it on the stream.
            response = await fcm.send_message(ReceiptMessage(tok, data={"r": "1"}, message_id="aiofcm-m3"))
            assert response.is_successful, response.status
            receipt, attributes = await inbox.get("dr2:aiofcm-m3")
            check_receipt(receipt, attributes, "aiofcm-m3", tok)
            await ack(receipt)

            # An upstream message from the device, injected through the native API, then ACKed.
            sent = await call("POST", f"/api/tokens/{tok}/upstream",
                              {"category": "com.example.app", "data": {"hello": "world"}})
            assert sent["status"] == "sent", sent
            upstream, attributes = await inbox.get(sent["messageId"])
            check_upstream(upstream, attributes, sent["messageId"], tok, {"hello": "world"})
            listing = await wait_for(lambda l: unacked_upstream(l, sent["connection"]) == 1,
                                     "the upstream message to count as unacknowledged")
            assert listing["connections"][0]["jid"].startswith(f"{SENDER_ID}@gcm.googleapis.com/"), listing
            await ack(upstream)
            await wait_for(lambda l: unacked_upstream(l, sent["connection"]) == 0,
                           "unackedUpstream to return to 0 after the ACK")
        finally:
            fcm.pool.close()
        await wait_for(lambda l: not l["connections"], "the aiofcm session to close")

    asyncio.run(scenario())

    logged = xmpp_messages(tok)
    assert {json.dumps(json.loads(m["payload"])["data"], sort_keys=True) for m in logged} == \
        {'{"score": "5x1"}', '{"r": "1"}'}, logged
    assert all(m["target"] == tok for m in logged), logged


# --- slixmpp -------------------------------------------------------------------------------------

def make_slixmpp_client(inbox):
    import slixmpp
    from slixmpp.xmlstream import ElementBase, register_stanza_plugin
    from slixmpp.xmlstream.handler import Callback
    from slixmpp.xmlstream.matcher import StanzaPath

    class GCM(ElementBase):
        """<gcm xmlns="google:mobile:data">JSON</gcm>, as `message/gcm`."""
        namespace = "google:mobile:data"
        name = "gcm"
        plugin_attrib = "gcm"
        interfaces = {"json"}

        def get_json(self):
            return json.loads(self.xml.text or "null")

        def set_json(self, value):
            self.xml.text = json.dumps(value)

        def del_json(self):
            self.xml.text = None

    register_stanza_plugin(slixmpp.Message, GCM)

    class CCSClient(slixmpp.ClientXMPP):
        def __init__(self):
            super().__init__(f"{SENDER_ID}@gcm.googleapis.com", SERVER_KEY)
            # CCS: TLS from the first byte, never STARTTLS, never plain text.
            self.enable_direct_tls = True
            self.enable_starttls = False
            self.enable_plaintext = False
            self.ca_certs = Path(CA_FILE)
            self.ready = asyncio.get_running_loop().create_future()
            self.add_event_handler("session_start", lambda _: self.ready.done() or self.ready.set_result(True))
            self.add_event_handler("failed_all_auth", lambda _: self.ready.done() or self.ready.set_exception(
                AssertionError("SASL authentication failed")))
            # slixmpp's `message` event fires only for messages with a <body>.
            self.register_handler(Callback("CCS", StanzaPath("message/gcm"), self.on_gcm))

        def on_gcm(self, stanza):
            inbox.put(stanza["gcm"]["json"], {
                "type": stanza.xml.get("type"), "from": stanza.xml.get("from"), "to": stanza.xml.get("to")})

        def send_gcm(self, payload):
            stanza = self.Message()
            stanza["gcm"]["json"] = payload
            stanza.send()

        def ack(self, payload):
            self.send_gcm({"to": payload["from"], "message_id": payload["message_id"], "message_type": "ack"})

    return CCSClient()


def test_slixmpp():
    logging.getLogger("slixmpp").setLevel(logging.DEBUG)
    tok, unknown = token("slix1"), token("slix9")
    register(tok)
    # Quotes, an apostrophe, < and &: slixmpp escapes them as entities (&quot; &apos; &lt; &amp;).
    awkward = {"text": "it's \"5 < 6\" & <b>bold</b>"}

    async def scenario():
        inbox = Inbox()
        client = make_slixmpp_client(inbox)
        client.connect(XMPP_HOST, XMPP_PORT)
        try:
            await asyncio.wait_for(client.ready, TIMEOUT)
            assert str(client.boundjid).startswith(f"{SENDER_ID}@gcm.googleapis.com/"), client.boundjid

            client.send_gcm({"to": tok, "message_id": "slix-m1", "data": awkward})
            ack, attributes = await inbox.get("slix-m1")
            assert ack == {"from": tok, "message_id": "slix-m1", "message_type": "ack"}
            assert attributes["type"] is None, attributes  # ACKs are bare <message> (reference §6)

            client.send_gcm({"to": unknown, "message_id": "slix-m2", "data": {"a": "b"}})
            nack, _ = await inbox.get("slix-m2")
            assert nack["message_type"] == "nack" and nack["error"] == "DEVICE_UNREGISTERED", nack
            assert nack["from"] == unknown and nack["error_description"], nack

            client.send_gcm({"to": tok, "message_id": "slix-m3", "data": {"r": "1"},
                             "delivery_receipt_requested": True})
            ack, _ = await inbox.get("slix-m3")
            assert ack["message_type"] == "ack", ack
            receipt, attributes = await inbox.get("dr2:slix-m3")
            check_receipt(receipt, attributes, "slix-m3", tok)
            client.ack(receipt)

            sent = await call("POST", f"/api/tokens/{tok}/upstream",
                              {"category": "com.example.app", "data": {"hello": "world"}})
            assert sent["status"] == "sent", sent
            upstream, attributes = await inbox.get(sent["messageId"])
            check_upstream(upstream, attributes, sent["messageId"], tok, {"hello": "world"})
            await wait_for(lambda l: unacked_upstream(l, sent["connection"]) == 1,
                           "the upstream message to count as unacknowledged")
            client.ack(upstream)
            await wait_for(lambda l: unacked_upstream(l, sent["connection"]) == 0,
                           "unackedUpstream to return to 0 after the ACK")
        finally:
            await client.disconnect()
        await wait_for(lambda l: not l["connections"], "the slixmpp session to close")

    asyncio.run(scenario())

    logged = xmpp_messages(tok)
    assert sorted((json.loads(m["payload"])["data"] for m in logged), key=json.dumps) == \
        sorted([awkward, {"r": "1"}], key=json.dumps), logged
