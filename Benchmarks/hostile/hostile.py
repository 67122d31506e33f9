#!/usr/bin/env python3
"""Availability of `fcm-registry serve` under hostile clients, on loopback only.

Starts the server itself (fresh database in a temporary directory, a free port, serve's own
connection timeouts), measures a baseline, then repeats the same measurement while each kind of
hostile client runs in turn, and ends with a SIGTERM test. Every phase is bounded in time; the
script stops by itself and always exits 0 (it is a benchmark: it prints numbers, it asserts
nothing).

    python3 Benchmarks/hostile/hostile.py --binary .build/release/fcm-registry

The measurement, in every phase:
  * `GET /health` latency (p50/p99) from one keep-alive client, one request every
    --health-interval seconds (a failed request counts as infinitely slow: p99 "failed");
  * `GET /health` on a new connection every 0.1 s (can a new client still get in?);
  * authenticated writes per second (`POST /fcm/notification` create) from --writers concurrent
    keep-alive clients.

Hostile kinds (each run by a separate worker process, `hostile.py --worker KIND`, so that the
hostile clients' CPU does not stall the measuring event loop):
  conditions   8 clients POSTing a 64 KiB repeated-topic condition to /api/conditions:check
  slow-header  8 clients sending a request line, then one header byte every 0.5 s, forever
  slow-body    8 clients sending an authenticated POST head with Content-Length: 1000000, then
               one body byte every 0.5 s
  idle         1,100 sockets opened and held (reopened when the server closes them); run against
               the main server and, with --idle-nofile, against a second server started under
               `ulimit -n` (soft and hard) of that value
  early-answer 8 clients POSTing /fcm/send unauthenticated with Content-Length: 8000000000 and
               streaming zeros as fast as they can; counts what the server took before closing
  xmpp-flood   --xmpp-flood-sockets (the XMPP listener's limit + 50) sockets opened and held on
               the XMPP port, reopened the moment the server closes them
  tls-silent   --tls-silent-sockets (the TLS listener's limit + 50) sockets opened and held on
               the TLS port without a byte of handshake, reopened when the server closes them

The main server runs all three listeners (plain HTTP, TLS with HTTP/2, XMPP over TLS) with a
local CA from `fcm-registry tls init`; every phase also probes a new TLS connection (handshake
and `GET /health`) every 0.1 s.

Standard library only (Python 3.11).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import shutil
import signal
import socket
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

HOST = "127.0.0.1"

# 64 KiB of repeated topics: just under the 65,536-byte condition limit, so it is parsed in full.
CONDITION = " || ".join(["'a' in topics"] * 3850)

HOSTILE_KINDS = ("conditions", "slow-header", "slow-body", "idle", "early-answer", "xmpp-flood", "tls-silent")

# serve's default --max-connections, which each listener has to itself.
DEFAULT_CONNECTION_LIMIT = 4096


# --------------------------------------------------------------------------------------------
# Small HTTP/1.1 client pieces (hand-written: fast, and in full control of what goes on the wire)
# --------------------------------------------------------------------------------------------


def build_request(method: str, path: str, key: str | None = None, body: bytes | None = None,
                  content_length: int | None = None) -> bytes:
    """The bytes of one HTTP/1.1 request (head, and body if given)."""
    lines = [f"{method} {path} HTTP/1.1", f"Host: {HOST}"]
    if key is not None:
        lines.append(f"Authorization: key={key}")
    if body is not None or content_length is not None:
        lines.append("Content-Type: application/json")
        lines.append(f"Content-Length: {content_length if content_length is not None else len(body)}")
    head = ("\r\n".join(lines) + "\r\n\r\n").encode()
    return head + (body or b"")


async def read_response(reader: asyncio.StreamReader) -> tuple[int, dict[str, str], bytes]:
    """Read one response: status, lower-cased headers, body (Content-Length or chunked)."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, value = line.split(":", 1)
            headers[name.strip().lower()] = value.strip()
    if "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    elif headers.get("transfer-encoding", "").lower() == "chunked":
        parts = []
        while True:
            size = int((await reader.readuntil(b"\r\n")).split(b";")[0], 16)
            parts.append(await reader.readexactly(size + 2))
            if size == 0:
                break
        body = b"".join(p[:-2] for p in parts)
    else:
        body = b""
    return status, headers, body


class KeepAliveClient:
    """One persistent connection; reconnects (and counts it) when the server closed it."""

    def __init__(self, port: int, timeout: float = 10.0):
        self.port = port
        self.timeout = timeout
        self.reader: asyncio.StreamReader | None = None
        self.writer: asyncio.StreamWriter | None = None
        self.connects = 0

    async def request(self, raw: bytes) -> tuple[int, dict[str, str], bytes]:
        """Send `raw`, return the response; raises on timeout or a broken connection."""
        try:
            if self.writer is None:
                self.reader, self.writer = await asyncio.wait_for(
                    asyncio.open_connection(HOST, self.port), self.timeout)
                self.connects += 1
            self.writer.write(raw)
            await self.writer.drain()
            response = await asyncio.wait_for(read_response(self.reader), self.timeout)
        except BaseException:
            self.close()
            raise
        if response[1].get("connection", "").lower() == "close":
            self.close()
        return response

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.reader = self.writer = None


def percentile(values: list[float], q: float) -> float | None:
    """The q-th percentile (0..100), nearest-rank; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    index = max(0, min(len(ordered) - 1, int(round(q / 100 * len(ordered) + 0.5)) - 1))
    return ordered[index]


def spread(values: list[float]) -> dict | None:
    """min / median / max of a list of seconds, rounded; None when empty."""
    if not values:
        return None
    return {"n": len(values), "min": round(min(values), 3), "median": round(statistics.median(values), 3),
            "max": round(max(values), 3)}


# --------------------------------------------------------------------------------------------
# The measurement: /health latency from one client, writes/s from eight
# --------------------------------------------------------------------------------------------


async def health_probe(port: int, stop_at: float, interval: float) -> dict:
    """GET /health on one keep-alive connection every `interval` s until `stop_at`.

    A failed request (error, 5 s timeout, non-200) counts as an infinitely slow sample, so
    unavailability shows up in p99 (printed as "failed")."""
    client = KeepAliveClient(port, timeout=5.0)
    request = build_request("GET", "/health")
    latencies, errors = [], {}
    while time.monotonic() < stop_at:
        started = time.perf_counter()
        try:
            status, _, _ = await client.request(request)
            if status == 200:
                latencies.append(time.perf_counter() - started)
            else:
                errors[str(status)] = errors.get(str(status), 0) + 1
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError) as error:
            errors[type(error).__name__] = errors.get(type(error).__name__, 0) + 1
        await asyncio.sleep(max(0.0, interval - (time.perf_counter() - started)))
    client.close()
    failures = sum(errors.values())
    return {"latencies": latencies + [float("inf")] * failures, "errors": errors, "connects": client.connects}


async def fresh_connection_probe(port: int, stop_at: float, interval: float,
                                 tls: ssl.SSLContext | None = None) -> dict:
    """GET /health on a new connection every `interval` s: can a new client still get in?
    Latency includes the connect (and with `tls`, the handshake); a failure (refused, 3 s
    timeout, reset) counts separately."""
    latencies, failures = [], {}
    request = build_request("GET", "/health")
    while time.monotonic() < stop_at:
        started = time.perf_counter()
        writer = None
        try:
            reader, writer = await asyncio.wait_for(
                asyncio.open_connection(HOST, port, ssl=tls, server_hostname="fcm.googleapis.com" if tls else None),
                3.0)
            writer.write(request)
            await writer.drain()
            status, _, _ = await asyncio.wait_for(read_response(reader), 3.0)
            if status == 200:
                latencies.append(time.perf_counter() - started)
            else:
                failures[str(status)] = failures.get(str(status), 0) + 1
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError) as error:
            failures[type(error).__name__] = failures.get(type(error).__name__, 0) + 1
        finally:
            if writer is not None:
                writer.close()
                if tls:
                    # TLS's close waits for the transport; left open, 150 closes pile up a phase.
                    try:
                        await asyncio.wait_for(writer.wait_closed(), 1.0)
                    except (OSError, asyncio.TimeoutError, ssl.SSLError):
                        pass
        await asyncio.sleep(max(0.0, interval - (time.perf_counter() - started)))
    return {"latencies": latencies, "failures": failures}


async def writer_client(port: int, key: str, stop_at: float, names: str, counter: list[int]) -> dict:
    """Authenticated device-group creates, back to back, on one keep-alive connection."""
    client = KeepAliveClient(port, timeout=10.0)
    ok, failures = 0, {}
    while time.monotonic() < stop_at:
        counter[0] += 1
        n = counter[0]
        body = json.dumps({"operation": "create", "notification_key_name": f"{names}-{n}",
                           "registration_ids": [f"tok{names}{n}:APA91bxxxxxxxxxxxx"]}).encode()
        try:
            status, _, _ = await client.request(build_request("POST", "/fcm/notification", key, body))
            if status == 200:
                ok += 1
            else:
                failures[str(status)] = failures.get(str(status), 0) + 1
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError) as error:
            failures[type(error).__name__] = failures.get(type(error).__name__, 0) + 1
            await asyncio.sleep(0.05)
    client.close()
    return {"ok": ok, "failures": failures, "stopped": time.monotonic()}


async def measure(port: int, key: str, seconds: float, args, label: str, server: "Server | None" = None) -> dict:
    """Run the health probe and the writers concurrently for `seconds`, and a new TLS
    connection now and then when `server` has a TLS listener; summarise."""
    started = time.monotonic()
    stop_at = started + seconds
    counter = [0]
    names = f"{label}-{os.getpid()}-{int(time.time() * 1000) % 10**9}"
    cpu_before, idle_before = _own_cpu(), _machine_idle()
    writer_tasks = [asyncio.create_task(writer_client(port, key, stop_at, names, counter))
                    for _ in range(args.writers)]

    async def when_writers_stop():
        if writer_tasks:
            await asyncio.wait(writer_tasks)
        return _own_cpu(), _machine_idle()

    async def tls_probe():
        if server is None or server.tls_port is None:
            return None
        return await fresh_connection_probe(server.tls_port, stop_at, 0.1, server.client_tls())

    health, fresh, tls, (cpu_after, idle_after), *writers = await asyncio.gather(
        health_probe(port, stop_at, args.health_interval),
        fresh_connection_probe(port, stop_at, 0.1), tls_probe(),
        when_writers_stop(), *writer_tasks)
    # Over the writers' own time: the probes may still be waiting for a connection after it.
    elapsed = max((w["stopped"] for w in writers), default=time.monotonic()) - started
    write_failures: dict[str, int] = {}
    for w in writers:
        for k, v in w["failures"].items():
            write_failures[k] = write_failures.get(k, 0) + v
    lat = health["latencies"]
    if tls is not None:
        tls_result = {
            "tls_fresh_p99_ms": None if not tls["latencies"] else percentile(tls["latencies"], 99) * 1000,
            "tls_fresh_ok": len(tls["latencies"]),
            "tls_fresh_failures": tls["failures"],
        }
    else:
        tls_result = {}
    return tls_result | {
        "health_p50_ms": None if not lat else percentile(lat, 50) * 1000,
        "health_p99_ms": None if not lat else percentile(lat, 99) * 1000,
        "health_max_ms": None if not lat else max(lat) * 1000,
        "health_samples": len(lat),
        "health_errors": health["errors"],
        "health_connects": health["connects"],
        "fresh_p99_ms": None if not fresh["latencies"] else percentile(fresh["latencies"], 99) * 1000,
        "fresh_ok": len(fresh["latencies"]),
        "fresh_failures": fresh["failures"],
        "writes_per_s": sum(w["ok"] for w in writers) / elapsed,
        "write_failures": write_failures,
        "load_cpu_s": round(cpu_after - cpu_before, 2),
        "machine_idle_s": round(idle_after - idle_before, 2),
    }


def _machine_idle() -> float:
    """Idle CPU seconds of the whole machine since boot (idle and I/O wait), from /proc/stat
    (Linux; NaN elsewhere)."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except OSError:
        return float("nan")
    return (fields[3] + (fields[4] if len(fields) > 4 else 0)) / os.sysconf("SC_CLK_TCK")


def _own_cpu() -> float:
    """CPU seconds this process (the writers and probes) has used so far."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


# --------------------------------------------------------------------------------------------
# Hostile clients (run inside the worker process)
# --------------------------------------------------------------------------------------------


async def trickle_connection(port: int, head: bytes, drip: bytes | None, interval: float,
                             until: float) -> dict:
    """One connection that sends `head`, then `drip` every `interval` s (or nothing if None),
    until the server closes it or `until`. Records when and how the server closed it, and the
    first bytes it sent (a 408? nothing?)."""
    record = {"connected": False, "closed_by": None, "close_s": None, "status": None, "open_s": None}
    try:
        reader, writer = await asyncio.wait_for(asyncio.open_connection(HOST, port), 10.0)
    except (OSError, asyncio.TimeoutError) as error:
        record["connect_error"] = type(error).__name__
        return record
    record["connected"] = True
    connected = time.monotonic()
    received = bytearray()

    async def watch():
        while True:
            try:
                data = await reader.read(65536)
            except OSError:
                return "reset", time.monotonic()
            if not data:
                return "eof", time.monotonic()
            if len(received) < 200:
                received.extend(data[:200])

    watcher = asyncio.create_task(watch())
    try:
        if head:
            writer.write(head)
            await writer.drain()
        while not watcher.done() and time.monotonic() < until:
            # A socket that sends nothing has nothing to wake up for before the end.
            pause = interval if drip is not None else until - time.monotonic()
            await asyncio.wait({watcher}, timeout=max(0.0, min(pause, until - time.monotonic())))
            if drip is not None and not watcher.done() and time.monotonic() < until:
                writer.write(drip)
                await writer.drain()
    except OSError:
        failed_at = time.monotonic()
        await asyncio.wait({watcher}, timeout=0.5)
        if not watcher.done():
            record["closed_by"] = "send-error"
            record["close_s"] = failed_at - connected
    if watcher.done() and record["closed_by"] is None:
        record["closed_by"], ended = watcher.result()
        record["close_s"] = ended - connected
    if record["closed_by"] is not None:
        record["closed_at"] = connected + record["close_s"]
    elif not watcher.done():
        watcher.cancel()
        if record["closed_by"] is None:
            record["open_s"] = time.monotonic() - connected
    if received.startswith(b"HTTP/"):
        try:
            record["status"] = int(received.split()[1])
        except (IndexError, ValueError):
            pass
    writer.close()
    return record


async def flood_connection(port: int, until: float, chunk: bytes, stall_after: float) -> dict:
    """One unauthenticated `POST /fcm/send` with Content-Length: 8000000000, streaming zeros as
    fast as possible until the server ends the stream (EOF or reset), stops reading without
    closing (`stall_after` s without progress: "stalled"), or `until`. `sent` counts bytes the
    kernel took: what the server read plus what sat in the socket buffers (our send buffer is
    256 KiB; the server's receive buffer on loopback can hold a few MB more)."""
    loop = asyncio.get_running_loop()
    record = {"connected": False, "closed_by": None, "close_s": None, "status": None, "response_s": None,
              "sent": 0, "stalled": False, "open_s": None}
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 256 * 1024)
    sock.setblocking(False)
    try:
        await asyncio.wait_for(loop.sock_connect(sock, (HOST, port)), 10.0)
    except (OSError, asyncio.TimeoutError) as error:
        sock.close()
        record["connect_error"] = type(error).__name__
        return record
    record["connected"] = True
    connected = time.monotonic()
    received = bytearray()

    async def watch():
        while True:
            try:
                data = await loop.sock_recv(sock, 65536)
            except OSError:
                return "reset", time.monotonic()
            if not data:
                return "eof", time.monotonic()
            if record["response_s"] is None:
                record["response_s"] = time.monotonic() - connected
            if len(received) < 200:
                received.extend(data[:200])

    watcher = asyncio.create_task(watch())
    head = build_request("POST", "/fcm/send", content_length=8_000_000_000)
    try:
        await loop.sock_sendall(sock, head)
        while not watcher.done() and time.monotonic() < until:
            # Send the next chunk, but stop as soon as the server ends the stream (the watcher),
            # even while the send is blocked on a full buffer.
            send = asyncio.ensure_future(loop.sock_sendall(sock, chunk))
            done, _ = await asyncio.wait({send, watcher}, timeout=stall_after,
                                         return_when=asyncio.FIRST_COMPLETED)
            if send in done:
                send.result()  # raises if the server reset the connection
                record["sent"] += len(chunk)
            else:
                send.cancel()
                if not done:  # neither progress nor an end of stream: the server just stopped reading
                    record["stalled"] = True
                    break
    except OSError:
        failed_at = time.monotonic()
        await asyncio.wait({watcher}, timeout=0.5)
        if not watcher.done():
            record["closed_by"] = "send-error"
            record["close_s"] = failed_at - connected
    if watcher.done() and record["closed_by"] is None:
        record["closed_by"], ended = watcher.result()
        record["close_s"] = ended - connected
    if record["closed_by"] is not None:
        record["closed_at"] = connected + record["close_s"]
    elif not watcher.done():
        watcher.cancel()
        if record["closed_by"] is None:
            record["open_s"] = time.monotonic() - connected
    if received.startswith(b"HTTP/"):
        try:
            record["status"] = int(received.split()[1])
        except (IndexError, ValueError):
            pass
    sock.close()
    return record


async def conditions_client(port: int, key: str, until: float) -> dict:
    """Back-to-back 64 KiB condition checks on one keep-alive connection."""
    client = KeepAliveClient(port, timeout=30.0)
    body = json.dumps({"condition": CONDITION}).encode()
    request = build_request("POST", "/api/conditions:check", key, body)
    latencies, failures = [], 0
    while time.monotonic() < until:
        started = time.perf_counter()
        try:
            status, _, _ = await client.request(request)
            if status == 200:
                latencies.append(time.perf_counter() - started)
            else:
                failures += 1
        except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError):
            failures += 1
            await asyncio.sleep(0.05)
    client.close()
    return {"latencies": latencies, "failures": failures, "connects": client.connects}


async def reconnecting(make_connection, until: float) -> list[dict]:
    """Run `make_connection()` again and again until `until` (a hostile client that comes back)."""
    records = []
    while time.monotonic() < until:
        record = await make_connection()
        records.append(record)
        if not record["connected"]:
            await asyncio.sleep(0.1)
    return records


def summarise_connections(records: list[dict]) -> dict:
    """Aggregate per-connection records: how many, how they ended, when, with what answer."""
    connected = [r for r in records if r["connected"]]
    closed = [r for r in connected if r["closed_by"]]
    statuses: dict[str, int] = {}
    for r in connected:
        key = str(r["status"]) if r["status"] else "none"
        statuses[key] = statuses.get(key, 0) + 1
    summary = {
        "connections": len(connected),
        "connect_errors": len(records) - len(connected),
        "closed_by_server": len(closed),
        "closed_how": {how: sum(1 for r in closed if r["closed_by"] == how)
                       for how in sorted({r["closed_by"] for r in closed})},
        "close_s": spread([r["close_s"] for r in closed]),
        "open_at_end": sum(1 for r in connected if r["open_s"] is not None),
        "open_at_end_s": spread([r["open_s"] for r in connected if r["open_s"] is not None]),
        "statuses": statuses,
    }
    if any("sent" in r for r in records):
        summary["sent_mb_total"] = round(sum(r.get("sent", 0) for r in records) / 1e6, 1)
        summary["sent_mb_per_conn"] = spread([r["sent"] / 1e6 for r in connected])
        summary["response_s"] = spread([r["response_s"] for r in connected if r["response_s"] is not None])
        summary["stalled"] = sum(1 for r in connected if r["stalled"])
    return summary


async def hostile_conditions(port: int, key: str, clients: int, until: float) -> dict:
    """(a) `clients` keep-alive clients checking a 64 KiB repeated-topic condition, back to back."""
    results = await asyncio.gather(*[conditions_client(port, key, until) for _ in range(clients)])
    latencies = [x for r in results for x in r["latencies"]]
    return {"requests": len(latencies), "failures": sum(r["failures"] for r in results),
            "p50_ms": round(percentile(latencies, 50) * 1000, 1) if latencies else None,
            "p99_ms": round(percentile(latencies, 99) * 1000, 1) if latencies else None}


async def hostile_slow_header(port: int, key: str, clients: int, until: float) -> dict:
    """(b) A request line, then one header byte every 0.5 s, never ending the head."""
    head = f"POST /fcm/notification HTTP/1.1\r\nHost: {HOST}\r\nX-Slow: ".encode()
    lists = await asyncio.gather(*[
        reconnecting(lambda: trickle_connection(port, head, b"a", 0.5, until), until) for _ in range(clients)])
    return summarise_connections([r for rs in lists for r in rs])


async def hostile_slow_body(port: int, key: str, clients: int, until: float) -> dict:
    """(c) An authenticated POST head with Content-Length: 1000000, then one body byte every 0.5 s."""
    head = build_request("POST", "/fcm/notification", key, content_length=1_000_000)
    lists = await asyncio.gather(*[
        reconnecting(lambda: trickle_connection(port, head, b" ", 0.5, until), until) for _ in range(clients)])
    return summarise_connections([r for rs in lists for r in rs])


async def hostile_idle(port: int, key: str, clients: int, until: float) -> dict:
    """(d) `clients` sockets opened (1 ms apart, or spread over a second for more than a
    thousand, so the burst does not overflow the listen backlog) and held without sending a
    byte; reopened when the server closes them. The XMPP flood and the silent TLS sockets are
    the same clients, against those listeners."""
    spacing = min(0.001, 1.0 / max(1, clients))

    async def one(i):
        await asyncio.sleep(i * spacing)
        return await reconnecting(lambda: trickle_connection(port, b"", None, 0.5, until), until)
    lists = await asyncio.gather(*[one(i) for i in range(clients)])
    return summarise_connections([r for rs in lists for r in rs])


async def hostile_early_answer(port: int, key: str, clients: int, until: float) -> dict:
    """(e) Unauthenticated POST /fcm/send, Content-Length: 8000000000, zeros as fast as possible."""
    chunk = bytes(256 * 1024)
    lists = await asyncio.gather(*[
        reconnecting(lambda: flood_connection(port, until, chunk, stall_after=2.0), until) for _ in range(clients)])
    return summarise_connections([r for rs in lists for r in rs])


HOSTILE = {"conditions": hostile_conditions, "slow-header": hostile_slow_header, "slow-body": hostile_slow_body,
           "idle": hostile_idle, "early-answer": hostile_early_answer, "xmpp-flood": hostile_idle,
           "tls-silent": hostile_idle}


def worker_main(args) -> None:
    """Entry point of `hostile.py --worker KIND`: prints one JSON line of results."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = args.clients + 256
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want if hard == resource.RLIM_INFINITY else min(want, hard), hard))
    until = time.monotonic() + args.seconds
    result = asyncio.run(HOSTILE[args.worker](args.port, args.key, args.clients, until))
    usage = resource.getrusage(resource.RUSAGE_SELF)
    result["worker_cpu_s"] = round(usage.ru_utime + usage.ru_stime, 2)
    print(json.dumps(result), flush=True)


# --------------------------------------------------------------------------------------------
# The server under test
# --------------------------------------------------------------------------------------------


def stage_binary(binary: str, directory: str, settle: float = 2.0, timeout: float = 180.0) -> str:
    """Copy the executable into `directory` once it exists and has not changed for `settle` s,
    so that a rebuild during the run neither removes it nor mixes two versions."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            st = os.stat(binary)
            current = (st.st_size, st.st_mtime_ns)
        except OSError:
            current = None
        if current is not None and current == last:
            staged = os.path.join(directory, "fcm-registry")
            shutil.copy2(binary, staged)
            if (os.stat(binary).st_size, os.stat(binary).st_mtime_ns) == current:
                return staged
        last = current
        time.sleep(settle)
    raise RuntimeError(f"{binary} did not appear or kept changing for {timeout} s")


def free_port() -> int:
    """A port nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return s.getsockname()[1]


class Server:
    """`fcm-registry serve` on a fresh database in `directory`, optionally under `ulimit -n`;
    with `certificates` (a folder `tls init` wrote), also its TLS and XMPP listeners."""

    def __init__(self, binary: str, directory: str, options: list[str], nofile: int | None = None,
                 certificates: str | None = None):
        os.makedirs(directory, exist_ok=True)
        self.directory = directory
        self.port = free_port()
        self.key_file = os.path.join(directory, "key.json")
        self.log_path = os.path.join(directory, "server.log")
        self.log = open(self.log_path, "wb")
        self.certificates = certificates
        self.tls_port = self.xmpp_port = None
        listeners = []
        if certificates:
            self.tls_port, self.xmpp_port = free_port(), free_port()
            listeners = ["--tls-cert", os.path.join(certificates, "server.pem"),
                         "--tls-key", os.path.join(certificates, "server-key.pem"),
                         "--tls-port", str(self.tls_port), "--xmpp-port", str(self.xmpp_port)]
        command = [binary, "serve", "--host", HOST, "--port", str(self.port),
                   "--db", os.path.join(directory, "registry.sqlite"), "--key-file", self.key_file,
                   *listeners, *options]

        def lower_nofile():
            # Like `ulimit -n N`: soft and hard, since serve raises its soft limit to the hard one.
            resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))

        self.process = subprocess.Popen(command, stdout=self.log, stderr=subprocess.STDOUT,
                                        stdin=subprocess.DEVNULL,
                                        preexec_fn=lower_nofile if nofile else None)
        self.key = None

    def wait_ready(self, timeout: float = 60.0) -> None:
        """Wait for the key file and a 200 from /health."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server exited with {self.process.returncode} at start; see {self.log_path}")
            if self.key is None and os.path.exists(self.key_file):
                try:
                    with open(self.key_file) as f:
                        text = f.read()
                    self.key = json.loads(text)["server_key"] if text.strip().startswith("{") else text.strip()
                except (ValueError, KeyError):
                    pass
            if self.key:
                try:
                    with socket.create_connection((HOST, self.port), timeout=1) as s:
                        s.sendall(build_request("GET", "/health"))
                        if s.recv(64).startswith(b"HTTP/1.1 200"):
                            return
                except OSError:
                    pass
            time.sleep(0.1)
        raise RuntimeError(f"server not ready within {timeout} s; see {self.log_path}")

    def alive(self) -> bool:
        return self.process.poll() is None

    def client_tls(self) -> ssl.SSLContext:
        """A client's TLS context trusting the server's local CA, offering HTTP/1.1."""
        context = ssl.create_default_context(cafile=os.path.join(self.certificates, "ca.pem"))
        context.set_alpn_protocols(["http/1.1"])
        return context

    def port_of(self, kind: str) -> int:
        """The port a hostile kind goes for."""
        return {"xmpp-flood": self.xmpp_port, "tls-silent": self.tls_port}.get(kind) or self.port

    def proc_stats(self) -> dict:
        """Open descriptors, RSS and CPU seconds of the server process (Linux /proc)."""
        stats = {}
        pid = self.process.pid
        try:
            stats["fds"] = len(os.listdir(f"/proc/{pid}/fd"))
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        stats["rss_mb"] = int(line.split()[1]) // 1024
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
                stats["cpu_s"] = (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
            with open(f"/proc/{pid}/limits") as f:
                for line in f:
                    if line.startswith("Max open files"):
                        stats["nofile_soft"] = line.split()[3]
        except OSError:
            pass
        return stats

    def log_count(self, text: str) -> int:
        """How many lines of the server's log contain `text`."""
        try:
            with open(self.log_path, "rb") as f:
                return sum(1 for line in f if text.encode() in line)
        except OSError:
            return 0

    def stop(self, timeout: float = 20.0) -> tuple[float | None, int | None]:
        """SIGTERM, wait; SIGKILL if it does not exit. Returns (seconds to exit, exit code)."""
        if not self.alive():
            return 0.0, self.process.returncode
        started = time.monotonic()
        self.process.send_signal(signal.SIGTERM)
        try:
            code = self.process.wait(timeout)
            return time.monotonic() - started, code
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            return None, None
        finally:
            self.log.close()


# --------------------------------------------------------------------------------------------
# Scenarios
# --------------------------------------------------------------------------------------------


async def run_hostile_worker(kind: str, server: Server, clients: int, seconds: float):
    """Start `hostile.py --worker kind` as a separate process; returns the process."""
    return await asyncio.create_subprocess_exec(
        sys.executable, os.path.abspath(__file__), "--worker", kind, "--port", str(server.port_of(kind)),
        f"--key={server.key}",  # "=": a key may begin with "-"
        "--clients", str(clients), "--seconds", str(seconds),
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)


async def scenario_baseline(server: Server, args) -> dict:
    """The measurement on a quiet server (after a one-second warm-up)."""
    await measure(server.port, server.key, 1.0, args, "warmup", server)
    before = server.proc_stats()
    result = await measure(server.port, server.key, args.seconds, args, "baseline", server)
    result["server"] = server.proc_stats()
    result["server"]["cpu_s"] = round(result["server"].get("cpu_s", 0) - before.get("cpu_s", 0), 2)
    return result


async def scenario_hostile(kind: str, server: Server, args, clients: int) -> dict:
    """`clients` hostile clients of `kind` start, settle for --warmup s, then the measurement
    runs for --seconds beside them."""
    total = args.warmup + args.seconds + 0.5
    before = server.proc_stats()
    worker = await run_hostile_worker(kind, server, clients, total)
    await asyncio.sleep(args.warmup)

    async def stats_at_the_end():
        # Just before the writers stop, while the hostile clients surely still run.
        await asyncio.sleep(max(0.0, args.seconds - 0.2))
        return server.proc_stats()

    stats = asyncio.create_task(stats_at_the_end())
    try:
        result = await measure(server.port, server.key, args.seconds, args, kind, server)
        result["server"] = await stats
    finally:
        stats.cancel()  # when the measurement failed; nothing, once done
    result["server"]["cpu_s"] = round(result["server"].get("cpu_s", 0) - before.get("cpu_s", 0), 2)
    err = b""
    try:
        out, err = await asyncio.wait_for(worker.communicate(), total + 30)
        result["hostile"] = json.loads(out.decode().strip().splitlines()[-1])
    except (asyncio.TimeoutError, IndexError, ValueError) as error:
        if worker.returncode is None:
            worker.kill()
            await worker.wait()
        last = err.decode(errors="replace").strip().splitlines()[-1:] or [""]
        result["hostile"] = {"error": f"worker failed: {type(error).__name__} {last[0][:200]}"}
    result["server_alive"] = server.alive()
    if not result["server_alive"]:
        code = server.process.returncode
        result["server_exit"] = f"signal {-code}" if code < 0 else f"exit code {code}"
        result["server_log_tail"] = _tail(server.log_path, 8)
    return result


async def scenario_timeouts(server: Server, args) -> dict:
    """On a quiet server: when are a slow-header, a slow-body, a silent and an idle keep-alive
    connection closed, against --header-timeout / --body-timeout / --idle-timeout?"""
    limit = time.monotonic() + max(args.header_timeout, args.body_timeout, args.idle_timeout) * 2 + 3
    slow_header = trickle_connection(
        server.port, f"GET /health HTTP/1.1\r\nHost: {HOST}\r\nX-Slow: ".encode(), b"a", 0.5, limit)
    slow_body = trickle_connection(
        server.port, build_request("POST", "/fcm/notification", server.key, content_length=1_000_000), b" ",
        0.5, limit)
    silent = trickle_connection(server.port, b"", None, 0.5, limit)
    # One complete request, then nothing: a kept-alive connection between requests.
    idle_after_request = trickle_connection(server.port, build_request("GET", "/health"), None, 0.5, limit)
    names = ("slow header", "slow body", "silent (no bytes)", "idle after 1 request")
    records = await asyncio.gather(slow_header, slow_body, silent, idle_after_request)
    return dict(zip(names, records))


async def scenario_sigterm(args, directory: str, servers: list) -> dict:
    """A fresh server with --shutdown-deadline, long header/body timeouts (so only the deadline
    can end the slow bodies), 8 slow-body clients, one kept-alive idle client and one normal
    request in flight (head and half its body sent); SIGTERM; the rest of that body 0.3 s
    later. How long until the process exits, with what code, and what happened to each client."""
    deadline = args.shutdown_deadline
    options = ["--log-level", args.log_level, "--shutdown-deadline", f"{deadline:g}s",
               "--header-timeout", "120s", "--body-timeout", "120s", "--idle-timeout", "120s"]
    server = Server(args.binary, directory, options)
    servers.append(server)  # killed by run() if anything below fails
    server.wait_ready()
    result: dict = {"deadline_s": deadline}
    until = time.monotonic() + deadline + 20
    slow = [asyncio.create_task(trickle_connection(
        server.port, build_request("POST", "/fcm/notification", server.key, content_length=1_000_000), b" ",
        0.5, until)) for _ in range(8)]
    # One kept-alive connection that has finished a request.
    idle = KeepAliveClient(server.port)
    await idle.request(build_request("GET", "/health"))

    async def idle_closed_at():
        try:
            await idle.reader.read(1)
        except OSError:
            pass
        return time.monotonic()

    idle_watch = asyncio.create_task(idle_closed_at())
    # One normal request in flight: head plus half the body now, the rest after SIGTERM.
    body = json.dumps({"operation": "create", "notification_key_name": "in-flight",
                       "registration_ids": ["tokinflight:APA91bxxxxxxxxxxxx"]}).encode()
    reader, writer = await asyncio.open_connection(HOST, server.port)
    writer.write(build_request("POST", "/fcm/notification", server.key, content_length=len(body)) + body[:20])
    await writer.drain()
    await asyncio.sleep(1.0)  # let everything be accepted and in its request

    sent = time.monotonic()
    server.process.send_signal(signal.SIGTERM)
    await asyncio.sleep(0.3)
    try:
        writer.write(body[20:])
        await writer.drain()
        status, headers, _ = await asyncio.wait_for(read_response(reader), deadline + 5)
        result["in_flight"] = f"{status} after {time.monotonic() - sent:.2f} s" + (
            ", Connection: close" if headers.get("connection", "").lower() == "close" else "")
    except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError) as error:
        result["in_flight"] = f"failed: {type(error).__name__} after {time.monotonic() - sent:.2f} s"
    writer.close()
    # A new connection after SIGTERM should be refused (no more accepting).
    try:
        probe = socket.create_connection((HOST, server.port), timeout=1)
        probe.sendall(build_request("GET", "/health"))
        probe.settimeout(1)
        answer = probe.recv(64)
        result["new_connection_after_sigterm"] = (answer.split(b"\r\n")[0].decode() or "accepted, closed")
        probe.close()
    except OSError as error:
        result["new_connection_after_sigterm"] = f"refused ({type(error).__name__})"

    # Wait for the process to exit (polling, 10 ms resolution), SIGKILL if it never does.
    exit_by = sent + deadline + 15
    while server.process.poll() is None and time.monotonic() < exit_by:
        await asyncio.sleep(0.01)
    if server.process.poll() is None:
        result["exit_s"], result["exit_code"] = None, None
        server.process.kill()
        server.process.wait()
    else:
        result["exit_s"], result["exit_code"] = time.monotonic() - sent, server.process.returncode
    server.log.close()
    try:
        closed_at = await asyncio.wait_for(idle_watch, 1.0)
        result["idle_keepalive"] = f"closed {closed_at - sent:.2f} s after SIGTERM"
    except asyncio.TimeoutError:
        result["idle_keepalive"] = "not closed"
    idle.close()
    records = await asyncio.gather(*slow)
    # close_s is from connect; the slow clients connected ~1 s before SIGTERM.
    result["slow_body_closed_after_sigterm_s"] = spread(
        [r["closed_at"] - sent for r in records if r.get("closed_at") is not None])
    result["slow_body"] = summarise_connections(records)
    result["log_tail"] = _tail(server.log_path, 6)
    return result


def _tail(path: str, lines: int) -> list[str]:
    try:
        with open(path, "rb") as f:
            return [line.decode(errors="replace").rstrip() for line in f.readlines()[-lines:]]
    except OSError:
        return []


# --------------------------------------------------------------------------------------------
# Report
# --------------------------------------------------------------------------------------------


def fmt_ms(value: float | None) -> str:
    if value is None:
        return "-"
    return "failed" if value == float("inf") else f"{value:.1f}"


def fresh_note(result: dict) -> str:
    """The new-connection probes, in a few words."""
    failed = sum(result.get("fresh_failures", {}).values())
    note = f"new-conn /health p99 {fmt_ms(result.get('fresh_p99_ms'))} ms"
    if failed:
        note += f", {failed}/{failed + result['fresh_ok']} FAILED {result['fresh_failures']}"
    if "tls_fresh_ok" in result:
        failed = sum(result["tls_fresh_failures"].values())
        note += f"; new TLS conn /health p99 {fmt_ms(result.get('tls_fresh_p99_ms'))} ms"
        if failed:
            note += f", {failed}/{failed + result['tls_fresh_ok']} FAILED {result['tls_fresh_failures']}"
    return note


def cell_ms(value: float | None) -> str:
    text = fmt_ms(value)
    return text if text in ("-", "failed") else f"{text} ms"


def cpu_note(result: dict) -> str:
    """The measuring process's CPU and the machine's idle CPU over a measurement."""
    return f"load cpu {result.get('load_cpu_s')} s, machine idle {result.get('machine_idle_s')} s"


def hostile_notes(kind: str, result: dict, args) -> str:
    """One line on what the hostile clients saw."""
    h = result.get("hostile", {})
    notes = []
    if "error" in h:
        notes.append(h["error"])
    elif kind == "conditions":
        notes.append(f"{h['requests']} checks, p50 {h['p50_ms']} ms p99 {h['p99_ms']} ms, {h['failures']} failed")
    else:
        close = h.get("close_s") or {}
        notes.append(f"{h.get('connections', 0)} conns, {h.get('closed_by_server', 0)} closed by server"
                     + (f" after {close['min']}/{close['median']}/{close['max']} s (min/med/max)" if close else ""))
        if h.get("open_at_end"):
            notes.append(f"{h['open_at_end']} still open at end")
        if h.get("connect_errors"):
            notes.append(f"{h['connect_errors']} connect errors")
        statuses = {k: v for k, v in h.get("statuses", {}).items() if k != "none"}
        if statuses:
            notes.append("answers " + ", ".join(f"{k}×{v}" for k, v in statuses.items()))
        if kind == "early-answer":
            per = h.get("sent_mb_per_conn") or {}
            notes.append("closed by " + ", ".join(f"{k}×{v}" for k, v in h.get("closed_how", {}).items()))
            notes.append(f"{h.get('sent_mb_total')} MB pushed"
                         + (f", per conn med {per['median']} max {per['max']} MB" if per else ""))
            if h.get("stalled"):
                notes.append(f"{h['stalled']} stalled (server stopped reading, did not close)")
    notes.append(fresh_note(result))
    if result.get("health_errors"):
        notes.append(f"/health errors {result['health_errors']}")
    if result.get("write_failures"):
        notes.append(f"write failures {result['write_failures']}")
    server = result.get("server", {})
    if server:
        notes.append(f"server fds {server.get('fds')}, cpu {server.get('cpu_s')} s")
    if "worker_cpu_s" in h:
        notes.append(f"hostile cpu {h['worker_cpu_s']} s")
    notes.append(cpu_note(result))
    if result.get("server_alive") is False:
        notes.append(f"SERVER DIED ({result.get('server_exit')}; log tail below)")
    return "; ".join(notes)


def print_report(args, rows: list[tuple[str, dict]], timeouts: dict, quiet_stop, sigterm: dict,
                 servers_info: list[str]) -> None:
    """The table, then the timeout and shutdown observations, then the goals."""
    baseline = rows[0][1]
    base_writes = baseline["writes_per_s"] or 1e-9
    base_p99 = baseline["health_p99_ms"] or 1e-9
    print()
    print(f"fcm-registry under hostile clients — {args.binary_source} (run from a copy)")
    print("load average at the end (1/5/15 min): " + " ".join(f"{x:.1f}" for x in os.getloadavg()))
    extra = " ".join(args.server_option) or "none"
    print(f"hostile phases: serve's defaults, more options: {extra}; deadline check: header {args.header_timeout:g}s, "
          f"body {args.body_timeout:g}s, idle {args.idle_timeout:g}s")
    print(f"{args.seconds}s per measurement, {args.writers} writers, /health every {args.health_interval * 1000:g} ms; "
          f"{os.cpu_count()} CPUs")
    for line in servers_info:
        print(line)
    print()
    header = f"{'scenario':<22} | {'/health p50':>11} | {'/health p99':>11} | {'writes/s':>8} | {'ratio to baseline':<22} | notes"
    print(header)
    print("-" * len(header))
    for name, r in rows:
        if name == "baseline":
            ratio = "-"
            notes = f"{r['health_samples']} probes; " + fresh_note(r)
            if r.get("health_errors"):
                notes += f"; /health errors {r['health_errors']}"
            if r.get("write_failures"):
                notes += f"; write failures {r['write_failures']}"
            notes += f"; server cpu {r['server'].get('cpu_s')} s, fds {r['server'].get('fds')}"
            notes += "; " + cpu_note(r)
        else:
            ratio = (f"writes {r['writes_per_s'] / base_writes * 100:.0f}%, "
                     f"p99 ×{(r['health_p99_ms'] or 0) / base_p99:.1f}").replace("×inf", "×∞")
            notes = hostile_notes(name.split(",")[0], r, args)
        print(f"{name:<22} | {cell_ms(r['health_p50_ms']):>11} | {cell_ms(r['health_p99_ms']):>11} | "
              f"{r['writes_per_s']:>8.0f} | {ratio:<22} | {notes}")

    for name, r in rows:
        if r.get("server_log_tail"):
            print(f"\n{name}: the server exited ({r['server_exit']}); last lines of its log:")
            for line in r["server_log_tail"]:
                print("    " + line[:300])

    print()
    print("Connection deadlines on a quiet server (close time from connect; answer = first bytes sent):")
    expected = {"slow header": ("--header-timeout", args.header_timeout),
                "slow body": ("--body-timeout", args.body_timeout),
                "silent (no bytes)": ("--header-timeout", args.header_timeout),
                "idle after 1 request": ("--idle-timeout", args.idle_timeout)}
    for name, record in timeouts.items():
        option, value = expected[name]
        if record["close_s"] is not None:
            seen = f"closed ({record['closed_by']}) after {record['close_s']:.2f} s, answer {record['status'] or 'none'}"
            verdict = "ok" if record["close_s"] <= value + 1 else "LATE"
            if record["close_s"] < value - 0.5:
                verdict = "EARLY"
        else:
            seen, verdict = f"still open after {record['open_s']:.1f} s", "NOT CLOSED"
        print(f"  {name:<22} {seen:<52} expected ≈ {value:g} s ({option})  {verdict}")

    print()
    quiet_s, quiet_code = quiet_stop
    print(f"Shutdown of the main server, quiet: "
          + (f"exit {quiet_code} after {quiet_s:.2f} s" if quiet_s is not None else "did not exit (killed)"))
    d = sigterm.get("deadline_s", args.shutdown_deadline)
    if "error" in sigterm:
        print(f"SIGTERM test failed: {sigterm['error']}")
    else:
        exit_s = sigterm["exit_s"]
        print(f"SIGTERM with 8 slow bodies + 1 request in flight (--shutdown-deadline {d}s): "
              + (f"exit {sigterm['exit_code']} after {exit_s:.2f} s" if exit_s is not None
                 else "did not exit within deadline + 15 s (killed)"))
        print(f"  in-flight request: {sigterm['in_flight']}; new connection after SIGTERM: "
              f"{sigterm['new_connection_after_sigterm']}; idle keep-alive: {sigterm['idle_keepalive']}")
        sb = sigterm["slow_body"]
        print(f"  slow bodies: {sb['closed_by_server']}/{sb['connections']} closed by server, "
              f"{sigterm['slow_body_closed_after_sigterm_s']} s after SIGTERM; answers {sb['statuses']}")

    print()
    print("Goals:")
    for name, r in rows[1:]:
        p99_ok = r["health_p99_ms"] is not None and r["health_p99_ms"] <= 50
        writes_ok = r["writes_per_s"] >= 0.8 * base_writes
        print(f"  {name:<22} /health p99 ≤ 50 ms: {'ok  ' if p99_ok else 'MISS'} ({cell_ms(r['health_p99_ms'])}"
              f"{', errors' if r.get('health_errors') else ''}{', new conns failed' if r.get('fresh_failures') else ''})"
              f"   writes ≥ 80% of baseline: "
              f"{'ok  ' if writes_ok else 'MISS'} ({r['writes_per_s'] / base_writes * 100:.0f}%)")
    if "exit_s" in sigterm:
        exit_s = sigterm["exit_s"]
        ok = exit_s is not None and exit_s <= d + 1
        print(f"  shutdown ≤ deadline + 1 s ({d + 1:g} s): {'ok' if ok else 'MISS'} "
              f"({'never' if exit_s is None else f'{exit_s:.2f} s'}, exit code {sigterm['exit_code']})")


# --------------------------------------------------------------------------------------------
# Main
# --------------------------------------------------------------------------------------------


def server_options(args) -> list[str]:
    """The hostile phases' server: serve's own timeouts, unless --server-option says otherwise."""
    return ["--log-level", args.log_level,
            "--shutdown-deadline", f"{args.shutdown_deadline:g}s", *args.server_option]


def deadline_options(args) -> list[str]:
    """The deadline check's server: short timeouts, so that each shows within seconds."""
    return ["--log-level", args.log_level, "--header-timeout", f"{args.header_timeout:g}s",
            "--body-timeout", f"{args.body_timeout:g}s", "--idle-timeout", f"{args.idle_timeout:g}s"]


def describe(server: Server, label: str) -> str:
    stats = server.proc_stats()
    return (f"{label}: pid {server.process.pid}, port {server.port}, open-file limit {stats.get('nofile_soft')}, "
            f"log {server.log_path}")


async def run(args) -> None:
    """Every phase in turn; always cleans up the processes it started."""
    directory = tempfile.mkdtemp(prefix="fcm-hostile-")
    servers: list[Server] = []
    rows: list[tuple[str, dict]] = []
    info: list[str] = []
    try:
        args.binary_source, args.binary = args.binary, stage_binary(args.binary, directory)
        certificates = os.path.join(directory, "certificates")
        subprocess.run([args.binary, "tls", "init", "--dir", certificates], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        main = Server(args.binary, os.path.join(directory, "main"), server_options(args),
                      certificates=certificates)
        servers.append(main)
        main.wait_ready()
        info.append(describe(main, "main server"))
        print(f"[{time.strftime('%X')}] baseline", flush=True)
        rows.append(("baseline", await scenario_baseline(main, args)))
        print(f"[{time.strftime('%X')}] connection deadlines", flush=True)
        deadlines = Server(args.binary, os.path.join(directory, "deadlines"), deadline_options(args))
        servers.append(deadlines)
        deadlines.wait_ready()
        info.append(describe(deadlines, "deadline check's server"))
        timeouts = await scenario_timeouts(deadlines, args)
        deadlines.stop()
        for kind in args.kinds:
            if not main.alive():
                info.append(f"main server exited with {main.process.returncode} before {kind}; restarted")
                main = Server(args.binary, os.path.join(directory, f"main-{kind}"), server_options(args),
                              certificates=certificates)
                servers.append(main)
                main.wait_ready()
            clients = {"idle": args.idle_sockets, "xmpp-flood": args.xmpp_flood_sockets,
                       "tls-silent": args.tls_silent_sockets}.get(kind, args.clients)
            print(f"[{time.strftime('%X')}] {kind} ({clients} clients)", flush=True)
            rows.append((kind, await scenario_hostile(kind, main, args, clients)))
        if args.idle_nofile and "idle" in args.kinds:
            low = Server(args.binary, os.path.join(directory, "low-nofile"), server_options(args),
                         nofile=args.idle_nofile)
            servers.append(low)
            low.wait_ready()
            info.append(describe(low, f"server under ulimit -n {args.idle_nofile}"))
            print(f"[{time.strftime('%X')}] idle under ulimit -n {args.idle_nofile}", flush=True)
            rows.append((f"idle, ulimit -n {args.idle_nofile}",
                         await scenario_hostile("idle", low, args, args.idle_sockets)))
            low.stop()
        for server in servers:
            xmpp = server.log_count("xmpp connection closed")
            closes = server.log_count("closing a slow connection")
            room = server.log_count("closing silent connections to make room")
            limit = server.log_count("connection limit reached")
            errors = server.log_count(" error ") + server.log_count(" critical ")
            info.append(f"  log lines of {os.path.basename(server.directory)}: {closes} 'closing a slow connection', "
                        f"{room} 'closing silent connections to make room', {limit} 'connection limit reached', "
                        f"{xmpp} 'xmpp connection closed', {errors} error/critical")
        quiet_stop = main.stop()
        print(f"[{time.strftime('%X')}] SIGTERM test", flush=True)
        try:
            sigterm = await scenario_sigterm(args, os.path.join(directory, "sigterm"), servers)
        except Exception as error:  # a benchmark reports, it does not crash
            sigterm = {"error": f"{type(error).__name__}: {error}"}
        print_report(args, rows, timeouts, quiet_stop, sigterm, info)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"rows": rows, "timeouts": timeouts, "sigterm": sigterm}, f, indent=1, default=str)
    finally:
        for server in servers:
            if server.alive():
                server.process.kill()
                server.process.wait()
        if args.keep:
            print(f"kept {directory}")
        else:
            shutil.rmtree(directory, ignore_errors=True)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--binary", default=".build/release/fcm-registry", help="the fcm-registry executable")
    parser.add_argument("--seconds", type=float, default=15.0,
                        help="length of each measurement (longer than serve's 10 s header timeout, so that it shows)")
    parser.add_argument("--warmup", type=float, default=1.5, help="hostile clients settle this long first")
    parser.add_argument("--writers", type=int, default=8, help="concurrent keep-alive writer clients")
    parser.add_argument("--clients", type=int, default=8, help="hostile clients per kind (but idle)")
    parser.add_argument("--idle-sockets", type=int, default=1100, help="sockets of the idle kind")
    parser.add_argument("--xmpp-flood-sockets", type=int, default=DEFAULT_CONNECTION_LIMIT + 50,
                        help="sockets of the xmpp-flood kind (past the XMPP listener's default limit)")
    parser.add_argument("--tls-silent-sockets", type=int, default=DEFAULT_CONNECTION_LIMIT + 50,
                        help="sockets of the tls-silent kind (past the TLS listener's default limit)")
    parser.add_argument("--idle-nofile", type=int, default=1024,
                        help="repeat the idle kind on a server under this `ulimit -n` (0: skip)")
    parser.add_argument("--health-interval", type=float, default=0.005, help="seconds between /health probes")
    parser.add_argument("--header-timeout", type=float, default=2, help="seconds, for the deadline check's server")
    parser.add_argument("--body-timeout", type=float, default=3, help="seconds, for the deadline check's server")
    parser.add_argument("--idle-timeout", type=float, default=5, help="seconds, for the deadline check's server")
    parser.add_argument("--shutdown-deadline", type=float, default=3, help="seconds, passed to serve")
    parser.add_argument("--kinds", default=",".join(HOSTILE_KINDS),
                        type=lambda s: [k for k in s.split(",") if k], help="hostile kinds to run, in order")
    parser.add_argument("--log-level", default="notice", help="the server's --log-level")
    parser.add_argument("--server-option", action="append", default=[], metavar="--OPTION=VALUE",
                        help="one more option for serve, e.g. --server-option=--max-connections=900 (repeatable)")
    parser.add_argument("--json", help="also write every number to this JSON file")
    parser.add_argument("--keep", action="store_true", help="keep the temporary directory (logs, databases)")
    # The hostile worker process (internal).
    parser.add_argument("--worker", choices=HOSTILE_KINDS, help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--key", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    for kind in args.kinds:
        if kind not in HOSTILE_KINDS:
            parser.error(f"unknown kind {kind}; kinds: {', '.join(HOSTILE_KINDS)}")
    return args


def main() -> int:
    args = parse_args()
    if args.worker:
        worker_main(args)
        return 0
    if not os.path.exists(args.binary):
        print(f"no binary at {args.binary}", file=sys.stderr)
        return 0
    try:
        asyncio.run(run(args))
    except KeyboardInterrupt:
        print("interrupted")
    except Exception:  # a benchmark prints what went wrong and still exits 0
        traceback.print_exc()
    return 0


if __name__ == "__main__":
    sys.exit(main())
