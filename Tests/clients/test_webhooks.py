"""Webhooks as an app server sees them, verified with the `standardwebhooks` package from PyPI.

run-webhooks.sh starts an fcm-registry that plays FCM (it answers UNREGISTERED for any token it
was not told about) and prepares the app's registry, relaying to it. This file serves the app's
registry itself (so that it can SIGTERM and kill -9 it) with --webhook-allow-private-networks,
runs a real HTTP receiver on a loopback port, and checks that every event arrives, signed as the
Standard Webhooks spec says: after a topic send with dead tokens, through a receiver outage, and
across a kill -9 of the server while events wait.
"""

import json
import os
import signal
import socket
import subprocess
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import requests
from standardwebhooks.webhooks import Webhook
from polling import eventually

BINARY = os.environ["FCM_REGISTRY_BINARY"]
RELAY_DB = os.environ["RELAY_DB"]
RELAY_PORT = int(os.environ["RELAY_PORT"])
RELAY_URL = f"http://127.0.0.1:{RELAY_PORT}"
RELAY = {"Authorization": f"key={os.environ['RELAY_KEY']}"}
UPSTREAM_URL = os.environ["UPSTREAM_URL"]
UPSTREAM = {"Authorization": f"key={os.environ['UPSTREAM_KEY']}"}
WORK = os.environ["WORK"]
# A documented option: the waits between attempts, short so that an outage costs seconds.
RETRY_SCHEDULE = "1s,1s,2s,2s,2s,2s,2s,2s,2s,2s"


def ok(reply, status=200):
    assert reply.status_code == status, (reply.status_code, reply.text)
    return reply.json() if reply.content else None


def healthy(base):
    try:
        return requests.get(f"{base}/health", timeout=1).status_code == 200
    except requests.RequestException:
        return False


def token(label):
    return f"{label}{uuid.uuid4().hex[:12]}:APA91b" + "Q" * 40


# MARK: - The relaying server, started and stopped here


class Server:
    def __init__(self):
        self.process = None
        self.starts = 0

    def start(self):
        self.starts += 1
        log = open(os.path.join(WORK, f"relay-{self.starts}.log"), "w")
        self.process = subprocess.Popen(
            [BINARY, "serve", "--db", RELAY_DB, "--port", str(RELAY_PORT), "--xmpp-port", "off",
             "--server-id", "hooks-1", "--relay-poll-interval", "200ms", "--webhook-allow-private-networks",
             "--webhook-retry-schedule", RETRY_SCHEDULE],
            stdout=subprocess.DEVNULL, stderr=log)
        eventually(lambda: healthy(RELAY_URL), timeout=30)

    def stop(self, sig=signal.SIGTERM):
        self.process.send_signal(sig)
        self.process.wait(timeout=30)


@pytest.fixture(scope="module")
def server():
    s = Server()
    s.start()
    yield s
    s.stop()


# MARK: - A receiver


class Receiver:
    """An HTTP receiver on a fixed loopback port that can go down and come back."""

    def __init__(self):
        self.events = []  # (headers, body), as received
        self.lock = threading.Lock()
        self.httpd = None
        import socket
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        self.port = s.getsockname()[1]
        s.close()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}/events"

    def up(self):
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                with receiver.lock:
                    receiver.events.append(({k.lower(): v for k, v in self.headers.items()}, body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        ThreadingHTTPServer.allow_reuse_address = True
        self.httpd = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def down(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def verified(self, secret):
        """Every event received, verified with the secret; repeats (same webhook-id) once."""
        hook = Webhook(secret)
        seen = {}
        with self.lock:
            received = list(self.events)
        for headers, body in received:
            event = hook.verify(body, headers)  # raises on a bad signature or an old timestamp
            seen.setdefault(headers["webhook-id"], event)
        return list(seen.values())


def register(receiver, events=("token.unregistered", "delivery.failed", "message.completed"), key=RELAY):
    created = ok(requests.post(f"{RELAY_URL}/api/webhooks", headers=key,
                               json={"url": receiver.url, "events": list(events)}), 201)
    assert created["secret"].startswith("whsec_")
    return created


def topic_send(live, dead, key=RELAY):
    """A topic send to live tokens ("FCM" knows them) and dead ones; its message id."""
    topic = f"news-{uuid.uuid4().hex[:6]}"
    if live:
        ok(requests.post(f"{UPSTREAM_URL}/iid/v1:batchAdd", headers=UPSTREAM,
                         json={"to": "/topics/devices", "registration_tokens": live}))
    ok(requests.post(f"{RELAY_URL}/iid/v1:batchAdd", headers=key,
                     json={"to": f"/topics/{topic}", "registration_tokens": live + dead}))
    answer = ok(requests.post(f"{RELAY_URL}/fcm/send", headers=key,
                              json={"to": f"/topics/{topic}", "data": {"n": "1"}}))
    return str(answer["message_id"])


def of_message(events, message_id):
    return [e for e in events if e["data"]["messageId"] == message_id]


def expect_events(events, message_id, live, dead):
    mine = of_message(events, message_id)
    unregistered = sorted((e["data"]["token"], e["data"]["reason"]) for e in mine if e["type"] == "token.unregistered")
    assert unregistered == sorted((t, "UNREGISTERED") for t in dead)
    failed = sorted((e["data"]["token"], e["data"]["error"]) for e in mine if e["type"] == "delivery.failed")
    assert failed == sorted((t, "UNREGISTERED") for t in dead)
    [completed] = [e for e in mine if e["type"] == "message.completed"]
    assert completed["data"] == {"projectId": "hooks-app", "messageId": message_id,
                                 "delivered": len(live), "failed": len(dead)}
    for event in mine:
        assert event["data"]["projectId"] == "hooks-app"
        assert event["timestamp"].endswith("Z")


# MARK: - Tests


def test_a_topic_send_with_dead_tokens_gives_signed_events(server):
    receiver = Receiver()
    receiver.up()
    hook = register(receiver)
    live, dead = [token("live"), token("live")], [token("dead"), token("dead")]
    message_id = topic_send(live, dead)
    events = eventually(lambda: (lambda v: v if len(of_message(v, message_id)) == 5 else None)(
        receiver.verified(hook["secret"])))
    expect_events(events, message_id, live, dead)
    # Each event its own id; the headers are Standard Webhooks'.
    with receiver.lock:
        ids = [h["webhook-id"] for h, _ in receiver.events]
        assert all(h["webhook-signature"].startswith("v1,") for h, _ in receiver.events)
    assert len(set(ids)) == 5 and all(i.startswith("msg_") for i in ids)
    shown = ok(requests.get(f"{RELAY_URL}/api/webhooks/{hook['id']}", headers=RELAY))
    assert "secret" not in shown
    assert eventually(lambda: ok(requests.get(f"{RELAY_URL}/api/webhooks/{hook['id']}", headers=RELAY))["sent"] == 5)
    # Per-webhook metrics, from the database every 5 s.
    line = f'fcm_registry_webhook_sent{{webhook="{hook["id"]}",project="hooks-app"}} 5'
    eventually(lambda: line in requests.get(f"{RELAY_URL}/metrics").text, timeout=20)
    receiver.down()
    ok(requests.delete(f"{RELAY_URL}/api/webhooks/{hook['id']}", headers=RELAY), 204)


def test_a_receiver_down_then_up_gets_every_event(server):
    receiver = Receiver()
    hook = register(receiver)  # registered while nothing listens on its port
    live, dead = [token("live")], [token("dead"), token("dead")]
    message_id = topic_send(live, dead)
    # Attempts fail while it is down: the webhook says so.
    shown = eventually(lambda: (lambda w: w if w.get("lastError") and w["backlog"] == 5 else None)(
        ok(requests.get(f"{RELAY_URL}/api/webhooks/{hook['id']}", headers=RELAY))))
    assert shown["failingSince"] and not shown["disabled"]
    time.sleep(3)
    receiver.up()
    events = eventually(lambda: (lambda v: v if len(of_message(v, message_id)) == 5 else None)(
        receiver.verified(hook["secret"])), timeout=60)
    expect_events(events, message_id, live, dead)
    final = eventually(lambda: (lambda w: w if w["backlog"] == 0 else None)(
        ok(requests.get(f"{RELAY_URL}/api/webhooks/{hook['id']}", headers=RELAY))))
    assert final["sent"] == 5 and final["failed"] == 0 and "failingSince" not in final
    receiver.down()
    ok(requests.delete(f"{RELAY_URL}/api/webhooks/{hook['id']}", headers=RELAY), 204)


def test_kill_9_while_events_wait_loses_none(server):
    receiver = Receiver()
    hook = register(receiver)
    live, dead = [token("live")], [token("dead")]
    message_id = topic_send(live, dead)
    eventually(lambda: ok(requests.get(f"{RELAY_URL}/api/webhooks/{hook['id']}", headers=RELAY)).get("lastError"))
    server.stop(signal.SIGKILL)
    receiver.up()
    server.start()  # the same --server-id: its claims are taken back at once
    events = eventually(lambda: (lambda v: v if len(of_message(v, message_id)) == 3 else None)(
        receiver.verified(hook["secret"])), timeout=60)
    expect_events(events, message_id, live, dead)
    receiver.down()
    ok(requests.delete(f"{RELAY_URL}/api/webhooks/{hook['id']}", headers=RELAY), 204)


def test_a_rotated_secret_signs_beside_the_new_one(server):
    receiver = Receiver()
    receiver.up()
    hook = register(receiver, events=["message.completed"])
    rotated = ok(requests.post(f"{RELAY_URL}/api/webhooks/{hook['id']}:rotateSecret", headers=RELAY))
    assert rotated["secret"] != hook["secret"]
    message_id = topic_send([token("live")], [])
    # Both the old and the new secret verify the same event.
    new = eventually(lambda: of_message(receiver.verified(rotated["secret"]), message_id))
    old = of_message(receiver.verified(hook["secret"]), message_id)
    assert [e["type"] for e in new] == [e["type"] for e in old] == ["message.completed"]
    with receiver.lock:
        assert len(receiver.events[-1][0]["webhook-signature"].split(" ")) == 2
    receiver.down()
    ok(requests.delete(f"{RELAY_URL}/api/webhooks/{hook['id']}", headers=RELAY), 204)


def test_a_private_address_is_refused_without_the_flag(server):
    """A second server on the same database, with the default rules, refuses what the first allows."""
    import socket
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    log = open(os.path.join(WORK, "strict.log"), "w")
    strict = subprocess.Popen([BINARY, "serve", "--db", RELAY_DB, "--port", str(port), "--xmpp-port", "off"],
                              stdout=subprocess.DEVNULL, stderr=log)
    try:
        base = f"http://127.0.0.1:{port}"
        eventually(lambda: healthy(base) if strict.poll() is None else pytest.fail("the second server stopped"),
                   timeout=30)
        for url in ["http://127.0.0.1:9/e", "https://127.0.0.1/e", "https://localhost/e", "https://169.254.169.254/e",
                    "https://[::ffff:192.168.0.1]/e"]:
            reply = requests.post(f"{base}/api/webhooks", headers=RELAY, json={"url": url, "events": ["delivery.failed"]})
            assert reply.status_code == 400, (url, reply.text)
            assert reply.json()["error"]["code"] == "invalid_argument"
    finally:
        strict.terminate()
        strict.wait(timeout=30)


class StalledReceiver:
    """A receiver that accepts every connection and never answers: each attempt lasts the whole timeout."""

    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(1024)
        self.port = self.sock.getsockname()[1]
        self.held = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}/events"

    def _accept(self):
        while True:
            try:
                connection, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(connection)

    def open_now(self):
        """Connections the server still holds open: attempts in flight."""
        count = 0
        for connection in list(self.held):
            connection.setblocking(False)
            try:
                while connection.recv(65536):  # what was sent is read; b"" once the server closed it
                    pass
            except BlockingIOError:
                count += 1
            except OSError:
                pass
        return count

    def close(self):
        self.sock.close()
        for connection in self.held:
            connection.close()


def another_relaying_project(name):
    """A second project on the relaying server's database, relaying to the same "FCM"; its key."""
    created = subprocess.run([BINARY, "project", "create", "--sender-id", str(uuid.uuid4().int % 10**12).zfill(12),
                              "--project-id", name, "--db", RELAY_DB], check=True, capture_output=True, text=True)
    subprocess.run([BINARY, "project", "relay", "--project-id", name, "--service-account",
                    os.path.join(WORK, "firebase-sa.json"), "--upstream", UPSTREAM_URL, "--db", RELAY_DB],
                   check=True, capture_output=True)
    key = {"Authorization": f"key={json.loads(created.stdout)['server_key']}"}
    eventually(lambda: ok(requests.get(f"{RELAY_URL}/api/project", headers=key))["delivery"] == "relayed")
    # A running server reads which projects relay at most once a second (docs/relay.md): a send in
    # that second would be recorded only.
    time.sleep(1.5)
    return key


def test_a_stalled_receiver_costs_only_its_own_webhook(server):
    """301 events wait for a receiver that never answers (each attempt lasts the 10 s timeout); another
    project's events still arrive at once, and the stalled webhook holds only a few of the server's
    attempts, not every one."""
    stalled = StalledReceiver()
    hook = register(stalled)
    message_id = topic_send([], [token("dead") for _ in range(150)])
    assert message_id
    eventually(lambda: ok(requests.get(f"{RELAY_URL}/api/webhooks/{hook['id']}", headers=RELAY))["backlog"] == 301,
               timeout=60)
    eventually(lambda: len(stalled.held) >= 1)
    key = another_relaying_project(f"hooks-other-{uuid.uuid4().hex[:6]}")
    receiver = Receiver()
    receiver.up()
    healthy = register(receiver, key=key)
    started = time.monotonic()
    other = topic_send([token("live")], [token("dead")], key=key)
    # Without the stalled webhook these arrive within a second or two; an attempt of it lasts 10 s,
    # so a server whose every slot it held would not send them before that.
    eventually(lambda: len(of_message(receiver.verified(healthy["secret"]), other)) == 3, timeout=8)
    in_flight = stalled.open_now()
    print(f"\nanother project's events arrived {time.monotonic() - started:.1f} s after its send, "
          f"while {in_flight} attempts to the stalled receiver were in flight")
    assert in_flight <= 8, "the stalled webhook holds more than its share of the server's attempts"
    receiver.down()
    ok(requests.delete(f"{RELAY_URL}/api/webhooks/{healthy['id']}", headers=key), 204)
    ok(requests.delete(f"{RELAY_URL}/api/webhooks/{hook['id']}", headers=RELAY), 204)
    stalled.close()
