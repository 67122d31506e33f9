#!/usr/bin/env python3
"""The audience index at 1M and 10M tokens: start-up, counts, pages, memory, and counts under writes.

For each size it generates the registry once (cached in --cache-dir; 10M tokens / 100k topics /
50M subscriptions takes about ten minutes and 6 GB), then, on a release build:

- start-up until `GET /health` answers, from the tables (no checkpoint) and from the checkpoint
  the first run saved at shutdown, each with a cold page cache when the machine lets us drop it;
- the median and p99 of counting `('topic-1' && ('topic-2' || 'topic-3')) || (!'topic-4' && 'topic-5')`,
  the five most popular topics;
- the median of the first page of 1000 tokens of that audience;
- the server's resident memory (now and peak) and the index's bytes per subscription;
- the count's p99 while `batchAdd` runs at full speed against the popular topics (wrk).

    python3 Benchmarks/audience/scale.py --binary .build/release/fcm-registry

The batchAdd phase adds tokens to the popular topics; they are deleted again afterwards (and
before each size is measured), so every run measures the registry as generated. Loopback only; every server is stopped at the end. Needs wrk (Debian: apt-get install wrk).
"""
import argparse
import http.client
import sqlite3
import json
import os
import re
import signal
import socket
import statistics
import subprocess
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BATCH_ADD = os.path.join(os.path.dirname(HERE), "http", "batch-add.lua")
CONDITION = ("('topic-1' in topics && ('topic-2' in topics || 'topic-3' in topics)) || "
             "(!('topic-4' in topics) && 'topic-5' in topics)")
SIZES = {"1m": (1_000_000, 10_000, 5_000_000), "10m": (10_000_000, 100_000, 50_000_000)}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def drop_caches():
    """Empties the page cache so that start-up reads from disk; False where the machine does not allow it."""
    try:
        os.sync()
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
        return True
    except OSError:
        return False


def registry(binary, cache, size):
    tokens, topics, subscriptions = SIZES[size]
    database = os.path.join(cache, f"registry-{tokens}-{topics}-{subscriptions}.sqlite")
    key_file = database + ".key.json"
    if not os.path.exists(key_file):
        for suffix in ["", "-wal", "-shm", ".audience"]:
            if os.path.exists(database + suffix):
                os.remove(database + suffix)
        started = time.time()
        output = subprocess.run([binary, "generate", "--db", database, "--tokens", str(tokens), "--topics", str(topics),
                                 "--subscriptions", str(subscriptions), "--seed", "1"],
                                check=True, capture_output=True, text=True).stdout
        with open(key_file, "w") as f:
            f.write(output[output.index("{"):])
        print(f"generated {size} in {time.time() - started:.0f} s")
    return database, json.load(open(key_file))["server_key"]


class Server:
    def __init__(self, binary, database):
        self.port = free_port()
        self.started = time.perf_counter()
        self.log = open(database + ".serve.log", "w")
        self.process = subprocess.Popen([binary, "serve", "--db", database, "--port", str(self.port)],
                                        stdout=self.log, stderr=self.log)
        while True:
            try:
                connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=5)
                connection.request("GET", "/health")
                if connection.getresponse().status == 200:
                    break
            except OSError:
                if self.process.poll() is not None:
                    raise SystemExit(f"serve exited with {self.process.returncode}; see {self.log.name}")
                time.sleep(0.02)
        self.startup = time.perf_counter() - self.started

    def memory(self):
        status = open(f"/proc/{self.process.pid}/status").read()
        rss = int(re.search(r"VmRSS:\s+(\d+)", status).group(1)) / 1024
        peak = int(re.search(r"VmHWM:\s+(\d+)", status).group(1)) / 1024
        return rss, peak

    def metric(self, name):
        connection = http.client.HTTPConnection("127.0.0.1", self.port)
        connection.request("GET", "/metrics")
        text = connection.getresponse().read().decode()
        return float(re.search(rf"^{name} ([\d.e+]+)$", text, re.M).group(1))

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=120)


def timed(server, key, body, trials):
    connection = http.client.HTTPConnection("127.0.0.1", server.port)
    headers = {"Authorization": f"key={key}", "Content-Type": "application/json"}
    times = []
    for _ in range(trials):
        start = time.perf_counter()
        connection.request("POST", "/api/audiences:resolve", json.dumps(body), headers)
        reply = json.loads(connection.getresponse().read())
        times.append((time.perf_counter() - start) * 1000)
    return times, reply


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def restore(database, tokens):
    """Deletes what a batchAdd phase added: the generated tokens have ids 1 to `tokens`, every
    later one came from batchAdd. Run with no server on the file."""
    started = time.time()
    with sqlite3.connect(database) as db:
        db.execute("PRAGMA busy_timeout = 10000")
        added = db.execute("SELECT count(*) FROM token WHERE id > ?", (tokens,)).fetchone()[0]
        if added:
            db.execute("DELETE FROM subscription WHERE tokenId > ?", (tokens,))
            db.execute("DELETE FROM token WHERE id > ?", (tokens,))
            # Rows deleted behind the servers' backs: a reset entry tells every process (and the
            # next start, whatever its checkpoint says) to reload the index from the tables.
            db.execute("INSERT INTO audienceChange (projectId, kind, topic, tokenIds, createdAt) "
                       "VALUES (0, 'reset', NULL, x'', ?)", (int(time.time() * 1000),))
    with sqlite3.connect(database) as db:
        # Fold the deletions into the file, so that start-up does not read them from the log.
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    if added:
        print(f"deleted {added} tokens added by an earlier batchAdd phase in {time.time() - started:.0f} s")


def measure(binary, cache, size, trials):
    database, key = registry(binary, cache, size)
    restore(database, SIZES[size][0])
    rows = {}
    if os.path.exists(database + ".audience"):
        os.remove(database + ".audience")
    cold = drop_caches()
    server = Server(binary, database)
    rows["start-up until /health, from the tables" + (" (cold cache)" if cold else "")] = f"{server.startup:.2f} s"
    server.stop()  # saves the checkpoint
    cold = drop_caches()
    server = Server(binary, database)
    rows["start-up until /health, from the checkpoint" + (" (cold cache)" if cold else "")] = f"{server.startup:.2f} s"
    try:
        counts, reply = timed(server, key, {"condition": CONDITION, "countOnly": True}, trials)
        rows["count of the 5-topic condition: median / p99"] = (
            f"{statistics.median(counts):.2f} / {percentile(counts, 99):.2f} ms (count {reply['count']})")
        pages, reply = timed(server, key, {"condition": CONDITION, "pageSize": 1000}, max(20, trials // 4))
        rows["first page of 1000 tokens: median"] = f"{statistics.median(pages):.2f} ms ({len(reply['tokens'])} tokens)"
        rss, peak = server.memory()
        rows["server RSS now / peak"] = f"{rss:.0f} / {peak:.0f} MiB"
        subscriptions = server.metric("fcm_registry_audience_subscriptions")
        index_bytes = server.metric("fcm_registry_audience_bytes")
        rows["index bytes per subscription"] = f"{index_bytes / subscriptions:.2f} ({index_bytes / 2**20:.0f} MiB for {subscriptions:.0f})"

        # Counts while batchAdd runs at full speed against the popular topics.
        writer = subprocess.Popen(["wrk", "-t1", "-c4", "-d20s", "-s", BATCH_ADD, f"http://127.0.0.1:{server.port}"],
                                  stdout=subprocess.PIPE, text=True, env={**os.environ, "KEY": key})
        time.sleep(1)
        under = []
        while writer.poll() is None:
            times, _ = timed(server, key, {"condition": CONDITION, "countOnly": True}, 20)
            under += times
        output = writer.stdout.read()
        rate = float(re.search(r"Requests/sec:\s+([\d.]+)", output).group(1)) * 1000
        rows["count p99 while batchAdd writes"] = (
            f"{percentile(under, 99):.2f} ms (median {statistics.median(under):.2f} ms, {len(under)} counts, "
            f"batchAdd {rate:.0f} subscriptions/s)")
    finally:
        server.stop()
    restore(database, SIZES[size][0])
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default=".build/release/fcm-registry")
    parser.add_argument("--cache-dir", default="/tmp/fcm-registry-bench")
    parser.add_argument("--sizes", default="1m,10m")
    parser.add_argument("--trials", type=int, default=200)
    args = parser.parse_args()
    os.makedirs(args.cache_dir, exist_ok=True)
    results = {size: measure(os.path.abspath(args.binary), args.cache_dir, size, args.trials)
               for size in args.sizes.split(",")}
    sizes = list(results)
    print()
    print("| | " + " | ".join(f"{s} ({SIZES[s][0]:,} tokens / {SIZES[s][1]:,} topics / {SIZES[s][2]:,} subscriptions)"
                                for s in sizes) + " |")
    print("|---|" + "---|" * len(sizes))
    for row in results[sizes[0]]:
        print(f"| {row} | " + " | ".join(results[s].get(row, "") for s in sizes) + " |")


if __name__ == "__main__":
    main()
