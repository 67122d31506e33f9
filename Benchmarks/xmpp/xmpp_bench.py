#!/usr/bin/env python3
"""Downstream messages acked per second over XMPP (one connection with 100 in flight, then 8
connections) against the same messages over `POST /fcm/send` (wrk), one server, one run.

    python3 Benchmarks/xmpp/xmpp_bench.py --binary .build/release/fcm-registry

Every message is a real send to one registered token: validated, resolved and recorded in the
message log. Both protocols run without TLS, on loopback. Needs wrk.
"""
import argparse
import asyncio
import base64
import json
import os
import re
import socket
import subprocess
import tempfile
import time
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
TOKEN = "benchToken:APA91b" + "x" * 40
HEADER = (b'<stream:stream to="gcm.googleapis.com" version="1.0" xmlns="jabber:client" '
          b'xmlns:stream="http://etherx.jabber.org/streams">')


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


async def read_until(reader, marker, buffer=b""):
    while marker not in buffer:
        chunk = await reader.read(65536)
        if not chunk:
            raise ConnectionError(f"closed before {marker!r}: {buffer[-300:]!r}")
        buffer += chunk
    index = buffer.index(marker) + len(marker)
    return buffer[:index], buffer[index:]


async def login(port, sender, key):
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(HEADER)
    _, rest = await read_until(reader, b"</stream:features>")
    credentials = base64.b64encode(f"\0{sender}\0{key}".encode()).decode()
    writer.write(f'<auth xmlns="urn:ietf:params:xml:ns:xmpp-sasl" mechanism="PLAIN">{credentials}</auth>'.encode())
    answer, rest = await read_until(reader, b"/>", rest)
    assert b"success" in answer, answer
    writer.write(HEADER)
    _, rest = await read_until(reader, b"</stream:features>", rest)
    writer.write(b'<iq type="set" id="b1"><bind xmlns="urn:ietf:params:xml:ns:xmpp-bind"/></iq>')
    _, rest = await read_until(reader, b"</iq>", rest)
    return reader, writer, rest


def stanza(connection, number):
    body = json.dumps({"to": TOKEN, "message_id": f"m-{connection}-{number}", "data": {"score": "5x1"}})
    return f'<message id=""><gcm xmlns="google:mobile:data">{body}</gcm></message>'.encode()


async def drive(port, sender, key, connection, in_flight, deadline, counts):
    """Keeps `in_flight` messages unanswered on one connection until `deadline`; counts acks."""
    reader, writer, rest = await login(port, sender, key)
    sent = 0
    writer.write(b"".join(stanza(connection, sent + i) for i in range(in_flight)))
    sent += in_flight
    carry = rest
    acks = nacks = 0
    while time.monotonic() < deadline:
        chunk = await reader.read(65536)
        if not chunk:
            break
        data = carry + chunk
        answered = data.count(b"</message>")
        # Keep a possibly split closing tag for the next read.
        last = data.rfind(b"</message>")
        carry = data[last + len(b"</message>"):] if last >= 0 else data
        nacks += data[: last + 1 if last >= 0 else 0].count(b'"message_type":"nack"')
        acks += answered
        if answered and time.monotonic() < deadline:
            writer.write(b"".join(stanza(connection, sent + i) for i in range(answered)))
            sent += answered
    counts.append((acks - nacks, nacks))
    writer.close()


async def xmpp_rate(port, sender, key, connections, in_flight, seconds):
    counts = []
    started = time.monotonic()
    deadline = started + seconds
    await asyncio.gather(*(drive(port, sender, key, c, in_flight, deadline, counts) for c in range(connections)))
    elapsed = time.monotonic() - started
    acked = sum(a for a, _ in counts)
    nacked = sum(n for _, n in counts)
    return acked / elapsed, nacked


def wrk(url, seconds, connections, key):
    script = os.path.join(HERE, "legacy-send.lua")
    output = subprocess.run(
        ["wrk", "-t2", f"-c{connections}", f"-d{seconds}s", "-s", script, url], capture_output=True, text=True,
        env={**os.environ, "KEY": key, "TOKEN": TOKEN}).stdout
    match = re.search(r"Requests/sec:\s+([\d.]+)", output)
    non2xx = re.search(r"Non-2xx or 3xx responses: (\d+)", output)
    return float(match.group(1)) if match else 0.0, int(non2xx.group(1)) if non2xx else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default=".build/release/fcm-registry")
    parser.add_argument("--seconds", type=int, default=10)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="xmpp-bench-")
    http, xmpp = free_port(), free_port()
    server = subprocess.Popen(
        [os.path.abspath(args.binary), "serve", "--db", f"{folder}/r.sqlite", "--port", str(http),
         "--xmpp-plaintext", "--xmpp-port", str(xmpp), "--key-file", f"{folder}/key.json", "--log-level", "warning",
         "--xmpp-connections", "100"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{http}/health")
                break
            except OSError:
                time.sleep(0.1)
        created = json.load(open(f"{folder}/key.json"))
        key, sender = created["server_key"], created["sender_id"]
        request = urllib.request.Request(
            f"http://127.0.0.1:{http}/iid/v1:batchAdd", method="POST",
            data=json.dumps({"to": "/topics/bench", "registration_tokens": [TOKEN]}).encode(),
            headers={"Authorization": f"key={key}", "Content-Type": "application/json"})
        urllib.request.urlopen(request).read()

        rows = []
        one, nacks1 = asyncio.run(xmpp_rate(xmpp, sender, key, 1, 100, args.seconds))
        rows.append(("XMPP, 1 connection, 100 in flight", one, nacks1))
        eight, nacks8 = asyncio.run(xmpp_rate(xmpp, sender, key, 8, 100, args.seconds))
        rows.append(("XMPP, 8 connections, 100 in flight each", eight, nacks8))
        for connections in (8, 64):
            rate, errors = wrk(f"http://127.0.0.1:{http}", args.seconds, connections, key)
            rows.append((f"POST /fcm/send, wrk, {connections} connections", rate, errors))
        print(f"{'path':<44} {'messages/s':>11} {'refused':>8}")
        for name, rate, refused in rows:
            print(f"{name:<44} {rate:>11,.0f} {refused:>8}")
        best_http = max(rate for name, rate, _ in rows if name.startswith("POST"))
        print(f"\nXMPP (8 connections) / best HTTP: {eight / best_http:.2f}; "
              f"XMPP (1 connection) / best HTTP: {one / best_http:.2f}")
    finally:
        server.terminate()
        server.wait()


if __name__ == "__main__":
    main()
