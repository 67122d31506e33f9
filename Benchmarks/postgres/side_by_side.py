#!/usr/bin/env python3
"""PostgreSQL against SQLite, side by side in one run on one machine: the same measurements on
each backend, one after the other, and their ratios.

- group creates/s, and `GET /health`/s as the ceiling, on an empty registry (wrk, 64 connections);
- batchAdd subscriptions/s (1000 new tokens per request to the five popular topics, 4 connections)
  on a generated registry of --tokens tokens;
- on that registry: the count of a 5-topic condition (p50, p99) and its first page of 1000 tokens (p50);
- start-up at --large tokens until `GET /health` answers: from the tables, from the checkpoint,
  and from the checkpoint plus the change feed written after it (a server killed with SIGKILL
  after 10 batchAdd requests of 1000 tokens, so its checkpoint is older than the feed);
- cross-server visibility with three servers on one database: a subscription written through one
  server, polled on the other two until they count it (p50, p99).

    python3 Benchmarks/postgres/side_by_side.py --binary .build/release/fcm-registry \
        --postgres "$FCM_REGISTRY_TEST_POSTGRES" --cache-dir /var/tmp/fcm-bench

The PostgreSQL URL names a database the script may fill: it works in schemas `bench_*` of its
own and drops them at the end. Generated SQLite files are kept in --cache-dir. Needs wrk and psql.
"""
import argparse
import http.client
import json
import os
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
CONDITION = "('topic-1' in topics && ('topic-2' in topics || 'topic-3' in topics)) || (!('topic-4' in topics) && 'topic-5' in topics)"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


class Backend:
    """Where a measurement's registry lives: an SQLite file, or a PostgreSQL schema."""

    def __init__(self, kind, args, work):
        self.kind, self.args, self.work = kind, args, work
        self.made = []

    def fresh(self, name):
        if self.kind == "sqlite":
            path = os.path.join(self.work, f"{name}.sqlite")
            for suffix in ("", "-wal", "-shm", ".audience"):
                if os.path.exists(path + suffix):
                    os.remove(path + suffix)
            return path
        schema = f"bench_{name}"
        base = self.args.postgres.split("?")[0]
        subprocess.run(["psql", base, "-qc", f"DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}"],
                       check=True, capture_output=True)
        self.made.append(schema)
        joiner = "&" if "?" in self.args.postgres else "?"
        return f"{self.args.postgres}{joiner}search_path={schema}"

    def generated(self, tokens, topics, subscriptions):
        """A generated registry (cached for SQLite, made once per run for PostgreSQL) and its key."""
        name = f"gen{tokens}"
        if self.kind == "sqlite":
            cached = os.path.join(self.args.cache_dir, f"gen-{tokens}-{topics}-{subscriptions}.sqlite")
            if not os.path.exists(cached):
                generate(self.args.binary, cached, tokens, topics, subscriptions)
            path = os.path.join(self.work, f"{name}.sqlite")
            for suffix in ("", "-wal", "-shm", ".audience"):
                if os.path.exists(path + suffix):
                    os.remove(path + suffix)
            shutil.copyfile(cached, path)
            key = json.load(open(cached + ".key.json"))["server_key"]
            return path, key
        location = self.fresh(name)
        started = time.time()
        key = generate(self.args.binary, location, tokens, topics, subscriptions)
        print(f"  [{self.kind}] generated {tokens} tokens in {time.time() - started:.0f} s", flush=True)
        return location, key

    def drop_all(self):
        base = self.args.postgres.split("?")[0]
        for schema in self.made:
            subprocess.run(["psql", base, "-qc", f"DROP SCHEMA IF EXISTS {schema} CASCADE"], capture_output=True)


def generate(binary, location, tokens, topics, subscriptions):
    out = subprocess.run([binary, "generate", "--db", location, "--tokens", str(tokens), "--topics", str(topics),
                          "--subscriptions", str(subscriptions), "--seed", "1"],
                         check=True, capture_output=True, text=True).stdout
    key = json.loads(out)["server_key"]
    if not location.startswith("postgres"):
        with open(location + ".key.json", "w") as f:
            json.dump({"server_key": key}, f)
    return key


class Server:
    def __init__(self, binary, location, extra=(), key_file=None):
        self.port = free_port()
        command = [binary, "serve", "--db", location, "--port", str(self.port), "--xmpp-port", "off",
                   "--log-level", "warning", *extra]
        if key_file:
            command += ["--key-file", key_file]
        self.started = time.perf_counter()
        self.process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.url = f"http://127.0.0.1:{self.port}"

    def wait(self, deadline=900):
        while time.perf_counter() - self.started < deadline:
            if self.process.poll() is not None:
                raise SystemExit(f"server exited with {self.process.returncode}")
            try:
                connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=1)
                connection.request("GET", "/health")
                if connection.getresponse().status == 200:
                    return time.perf_counter() - self.started
            except OSError:
                time.sleep(0.02)
        raise SystemExit("server did not start")

    def stop(self, sig=signal.SIGTERM):
        self.process.send_signal(sig)
        self.process.wait(timeout=300)


def call(connection, key, path, body):
    connection.request("POST", path, json.dumps(body), {"Authorization": f"key={key}", "Content-Type": "application/json"})
    response = connection.getresponse()
    return json.loads(response.read())


def wrk(url, seconds, connections, threads, script=None, key=""):
    command = ["wrk", f"-t{threads}", f"-c{connections}", f"-d{seconds}s"]
    if script:
        command += ["-s", os.path.join(HERE, "..", "http", script)]
    out = subprocess.run(command + [url], capture_output=True, text=True, env={**os.environ, "KEY": key}).stdout
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    errors = re.search(r"non-2xx or errors: (\d+)", out)
    if errors and int(errors.group(1)):
        print(f"  wrk: {errors.group(1)} failed requests", flush=True)
    return rate


def first_key(location, work, binary):
    key_file = os.path.join(work, f"key-{time.time_ns()}.json")
    server = Server(binary, location, key_file=key_file)
    server.wait()
    return server, json.load(open(key_file))["server_key"]


def measure_writes(backend, args, results):
    location = backend.fresh("writes")
    server, key = first_key(location, backend.work, args.binary)
    try:
        results["health/s"] = wrk(server.url + "/health", args.seconds, 64, 2)
        results["group creates/s"] = wrk(server.url, args.seconds, 64, 2, "group-create.lua", key)
    finally:
        server.stop()


def measure_audience(backend, args, results):
    location, key = backend.generated(args.tokens, args.topics, args.subscriptions)
    server = Server(args.binary, location, ["--checkpoint", "off"])
    server.wait()
    try:
        connection = http.client.HTTPConnection("127.0.0.1", server.port)
        counts, pages = [], []
        for n in range(args.queries + 10):
            started = time.perf_counter()
            call(connection, key, "/api/audiences:resolve", {"condition": CONDITION, "countOnly": True})
            if n >= 10:
                counts.append((time.perf_counter() - started) * 1000)
        for n in range(args.queries // 4 + 5):
            started = time.perf_counter()
            call(connection, key, "/api/audiences:resolve", {"condition": CONDITION, "pageSize": 1000})
            if n >= 5:
                pages.append((time.perf_counter() - started) * 1000)
        results["count p50 ms"] = statistics.median(counts)
        results["count p99 ms"] = percentile(counts, 99)
        results["first page p50 ms"] = statistics.median(pages)
        results["batchAdd subscriptions/s"] = 1000 * wrk(server.url, args.seconds * 2, 4, 1, "batch-add.lua", key)
    finally:
        server.stop()


def batch_add(url, key, requests, prefix):
    connection = http.client.HTTPConnection(url.split("//")[1].split(":")[0], int(url.rsplit(":", 1)[1]))
    for n in range(requests):
        tokens = [f"{prefix}{n}x{k}:APA91b" + "R" * 140 for k in range(1000)]
        call(connection, key, "/iid/v1:batchAdd", {"to": f"/topics/topic-{n % 5 + 1}", "registration_tokens": tokens})


def measure_startup(backend, args, results):
    location, key = backend.generated(args.large, args.large // 100, args.large * 5)
    checkpoint = os.path.join(backend.work, f"{backend.kind}-large.audience")
    if os.path.exists(checkpoint):
        os.remove(checkpoint)
    server = Server(args.binary, location, ["--checkpoint", checkpoint])
    results["start-up from the tables s"] = server.wait()
    server.stop()  # saves the checkpoint
    server = Server(args.binary, location, ["--checkpoint", checkpoint])
    results["start-up from the checkpoint s"] = server.wait()
    batch_add(server.url, key, 10, f"replay{backend.kind}")
    server.stop(signal.SIGKILL)  # the checkpoint stays older than the feed
    server = Server(args.binary, location, ["--checkpoint", checkpoint])
    results["start-up from the checkpoint + feed s"] = server.wait()
    server.stop()


def measure_visibility(backend, args, results):
    location = backend.fresh("visibility")
    first, key = first_key(location, backend.work, args.binary)
    servers = [first]
    try:
        for _ in range(2):
            server = Server(args.binary, location, ["--checkpoint", "off"])
            server.wait()
            servers.append(server)
        connections = [http.client.HTTPConnection("127.0.0.1", s.port) for s in servers]
        delays = []
        for trial in range(args.trials):
            writer = trial % 3
            topic = f"visibility-{trial}"
            call(connections[writer], key, "/iid/v1:batchAdd",
                 {"to": f"/topics/{topic}", "registration_tokens": [f"vis{trial}:APA91b" + "V" * 140]})
            written = time.perf_counter()
            for reader in (r for r in range(3) if r != writer):
                while call(connections[reader], key, "/api/audiences:resolve",
                           {"condition": f"'{topic}' in topics", "countOnly": True})["count"] != 1:
                    pass
            delays.append((time.perf_counter() - written) * 1000)
        results["visibility p50 ms"] = statistics.median(delays)
        results["visibility p99 ms"] = percentile(delays, 99)
    finally:
        for server in servers:
            server.stop()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default=".build/release/fcm-registry")
    parser.add_argument("--postgres", default=os.environ.get("FCM_REGISTRY_TEST_POSTGRES"))
    parser.add_argument("--cache-dir", default="/var/tmp/fcm-bench")
    parser.add_argument("--tokens", type=int, default=1_000_000)
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--subscriptions", type=int, default=5_000_000)
    parser.add_argument("--large", type=int, default=10_000_000, help="tokens for start-up (0: skip)")
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--trials", type=int, default=300)
    parser.add_argument("--only", default="writes,audience,startup,visibility")
    args = parser.parse_args()
    if not args.postgres:
        raise SystemExit("--postgres (or FCM_REGISTRY_TEST_POSTGRES) names the database")
    os.makedirs(args.cache_dir, exist_ok=True)
    work = tempfile.mkdtemp(prefix="side-by-side-")
    backends = [Backend("sqlite", args, work), Backend("postgres", args, work)]
    results = {b.kind: {} for b in backends}
    steps = {"writes": measure_writes, "audience": measure_audience, "startup": measure_startup,
             "visibility": measure_visibility}
    try:
        for name in args.only.split(","):
            if name == "startup" and not args.large:
                continue
            for backend in backends:
                print(f"{name} on {backend.kind}", flush=True)
                steps[name](backend, args, results[backend.kind])
                print("  " + json.dumps(results[backend.kind]), flush=True)
    finally:
        for backend in backends:
            backend.drop_all()
        shutil.rmtree(work, ignore_errors=True)
    print(f"\n{'measure':40} {'SQLite':>12} {'PostgreSQL':>12} {'PG/SQLite':>10}")
    for measure in results["sqlite"]:
        s, p = results["sqlite"][measure], results["postgres"].get(measure)
        if p is None:
            continue
        print(f"{measure:40} {s:12.2f} {p:12.2f} {p / s if s else float('nan'):10.2f}")
    for kind in ("sqlite", "postgres"):
        r = results[kind]
        if "group creates/s" in r:
            print(f"{kind}: group creates / health = {r['group creates/s'] / r['health/s']:.3f}")


if __name__ == "__main__":
    main()
