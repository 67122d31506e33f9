"""A stand-in for FCM HTTP v1 and Google's token endpoint, over HTTP/2 and TLS, with the faults a
real network has, switched on by the benchmark that runs it (`faults.py`).

It answers `POST /token` with a fresh access token, and `POST /v1/projects/{p}/messages:send`
after `latency` seconds with FCM's own bodies, unless a fault says otherwise:
- `stall_first`: tokens whose first request is never answered (the stream stays open);
- `html_404`: every send answered 404 with an HTML page, as a proxy or a wrong path does;
- `revoke_after`: after that many sends, every access token granted so far is refused (401
  UNAUTHENTICATED), as after a key rotation; tokens granted later are good;
- `quota_closed_for`: from the next send on, the quota is closed for that many seconds: 429
  QUOTA_EXCEEDED with `Retry-After: quota_retry_after`.
Every send is recorded: when, which token, the message's `data.n`, the status answered.
Needs the `h2` package (pip install h2); runs an asyncio loop in a thread of its own.
"""

import asyncio
import json
import logging
import ssl
import threading
import time

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings

SENT = b'{"name":"projects/standin/messages/1"}'
HTML_404 = b"<html><head><title>404 Not Found</title></head><body><h1>Not Found</h1></body></html>"
UNAUTHENTICATED = (
    b'{"error":{"code":401,"message":"Request had invalid authentication credentials.",'
    b'"status":"UNAUTHENTICATED"}}'
)
QUOTA = (
    b'{"error":{"code":429,"message":"Quota exceeded.","status":"RESOURCE_EXHAUSTED","details":'
    b'[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"QUOTA_EXCEEDED"}]}}'
)


# A server killed mid-write leaves asyncio warning about each write to its dead socket.
logging.getLogger("asyncio").setLevel(logging.CRITICAL)


class StandInFCM:
    def __init__(self, certificate, key, latency=0.02):
        self.latency = latency
        self.context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self.context.load_cert_chain(certificate, key)
        self.context.set_alpn_protocols(["h2"])
        self.lock = threading.Lock()
        self.sends = []  # (time, token, n, status, authorization)
        self.seen = {}
        self.stall_first = set()
        self.html_404 = False
        self.revoke_after = None
        self.revoked = set()
        self.tokens_granted = 0
        self.quota_closed_for = None
        self.quota_retry_after = 2
        self.quota_window = None  # (opened, closes)
        self.loop = asyncio.new_event_loop()
        self.port = None

    # The benchmark's side (any thread).

    def start(self):
        ready = threading.Event()

        def run():
            asyncio.set_event_loop(self.loop)
            server = self.loop.run_until_complete(
                self.loop.create_server(lambda: Connection(self), "127.0.0.1", 0, ssl=self.context)
            )
            self.port = server.sockets[0].getsockname()[1]
            ready.set()
            self.loop.run_forever()

        threading.Thread(target=run, daemon=True).start()
        ready.wait()
        return self

    def reset(self):
        with self.lock:
            self.sends = []
            self.seen = {}
            self.stall_first = set()
            self.html_404 = False
            self.revoke_after = None
            self.quota_closed_for = None
            self.quota_window = None

    def records(self):
        with self.lock:
            return list(self.sends)

    # The connections' side (the loop's thread).

    def grant(self):
        with self.lock:
            self.tokens_granted += 1
            return "standin-%d" % self.tokens_granted

    def judge(self, token, n, authorization):
        """The status and body for one send, and whether to answer at all."""
        now = time.monotonic()
        with self.lock:
            count = self.seen.get(token, 0) + 1
            self.seen[token] = count
            total = len(self.sends) + 1
            if self.revoke_after is not None and total > self.revoke_after:
                self.revoked.update("standin-%d" % i for i in range(1, self.tokens_granted + 1))
                self.revoke_after = None
            if self.quota_closed_for is not None and self.quota_window is None:
                self.quota_window = (now, now + self.quota_closed_for)
            if token in self.stall_first and count == 1:
                answer = (None, None, {})
            elif authorization.removeprefix("Bearer ") in self.revoked:
                answer = (401, UNAUTHENTICATED, {})
            elif self.quota_window and self.quota_window[0] <= now < self.quota_window[1]:
                answer = (429, QUOTA, {"retry-after": str(self.quota_retry_after)})
            elif self.html_404:
                answer = (404, HTML_404, {"content-type": "text/html"})
            else:
                answer = (200, SENT, {})
            self.sends.append((now, token, n, answer[0], authorization))
            return answer


class Connection(asyncio.Protocol):
    def __init__(self, standin):
        self.standin = standin
        config = h2.config.H2Configuration(client_side=False, header_encoding="utf-8")
        self.h2 = h2.connection.H2Connection(config=config)
        self.streams = {}
        self.transport = None

    def connection_made(self, transport):
        self.transport = transport
        self.h2.local_settings = h2.settings.Settings(
            client=False, initial_values={h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 1000}
        )
        self.h2.initiate_connection()
        self.flush()

    def flush(self):
        data = self.h2.data_to_send()
        if data and self.transport and not self.transport.is_closing():
            self.transport.write(data)

    def data_received(self, data):
        try:
            events = self.h2.receive_data(data)
        except h2.exceptions.ProtocolError:
            self.flush()
            self.transport.close()
            return
        for event in events:
            if isinstance(event, h2.events.RequestReceived):
                self.streams[event.stream_id] = (dict(event.headers), bytearray())
            elif isinstance(event, h2.events.DataReceived):
                if event.stream_id in self.streams:
                    self.streams[event.stream_id][1].extend(event.data)
                self.h2.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
            elif isinstance(event, h2.events.StreamEnded):
                stream = self.streams.pop(event.stream_id, None)
                if stream:
                    asyncio.ensure_future(self.answer(event.stream_id, *stream))
            elif isinstance(event, h2.events.StreamReset):
                self.streams.pop(event.stream_id, None)
            elif isinstance(event, h2.events.ConnectionTerminated):
                self.transport.close()
        self.flush()

    async def answer(self, stream_id, headers, body):
        path = headers.get(":path", "")
        if path == "/token":
            token = self.standin.grant()
            self.send(stream_id, 200, json.dumps(
                {"access_token": token, "expires_in": 3600, "token_type": "Bearer"}).encode(), {})
            return
        if not path.endswith("/messages:send"):
            self.send(stream_id, 404, b"{}", {})
            return
        await asyncio.sleep(self.standin.latency)
        try:
            message = json.loads(body)["message"]
            token = message.get("token", "")
            n = (message.get("data") or {}).get("n", "")
        except (ValueError, KeyError, TypeError):
            self.send(stream_id, 400, b"{}", {})
            return
        status, answer, extra = self.standin.judge(token, n, headers.get("authorization", ""))
        if status is not None:
            self.send(stream_id, status, answer, extra)

    def send(self, stream_id, status, body, extra):
        headers = [(":status", str(status)), ("content-length", str(len(body)))]
        headers += [("content-type", extra.get("content-type", "application/json"))]
        headers += [(name, value) for name, value in extra.items() if name != "content-type"]
        try:
            self.h2.send_headers(stream_id, headers)
            self.h2.send_data(stream_id, body, end_stream=True)
        except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError, h2.exceptions.FlowControlError):
            return
        self.flush()

    def connection_lost(self, exc):
        self.transport = None
