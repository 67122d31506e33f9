#!/usr/bin/env python3
"""Two builds of fcm-registry side by side, in one run: write throughput and audience counts.

For each binary, alternately: group creates per second as a share of `GET /health` on the same
server (wrk, 64 connections), `batchAdd` of 1000 new tokens per request into a generated
registry of 1M tokens / 10k topics / 5M subscriptions (subscriptions per second), and the median
of a 5-topic condition count over the most popular topics. The generated registry is made once
by the first binary and copied for the other (a newer binary migrates it when it opens it).

    python3 Benchmarks/compare/compare.py --old /path/to/old/fcm-registry --new .build/release/fcm-registry

Needs wrk (Debian: apt-get install wrk). Loopback only; every server is stopped at the end.
"""
import argparse
import http.client
import json
import os
import re
import shutil
import socket
import statistics
import subprocess
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
HTTP = os.path.join(os.path.dirname(HERE), "http")
CONDITION = ("('topic-1' in topics && ('topic-2' in topics || 'topic-3' in topics)) || "
             "(!('topic-4' in topics) && 'topic-5' in topics)")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    """A `serve` process on a database; its key comes from --key-file or the database's first project."""

    def __init__(self, binary, database, key=None):
        self.port = free_port()
        key_file = database + ".key.json"
        help_text = subprocess.run([binary, "serve", "--help"], capture_output=True, text=True).stdout
        command = [binary, "serve", "--db", database, "--port", str(self.port)]
        if "key-file" in help_text:
            command += ["--key-file", key_file]
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                        env={**os.environ, "LOG_LEVEL": "warning"})
        deadline = time.time() + 120
        while time.time() < deadline:
            try:
                connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=2)
                connection.request("GET", "/health")
                if connection.getresponse().status == 200:
                    break
            except OSError:
                time.sleep(0.1)
        if key is None:
            if os.path.exists(key_file):
                key = json.load(open(key_file))["server_key"]
            else:
                # An older build prints the first key on stdout.
                text = ""
                while "}" not in text:
                    line = self.process.stdout.readline().decode()
                    if not line:
                        raise SystemExit(f"{binary} printed no server key")
                    text += line
                key = json.loads(text)["server_key"]
        self.key = key

    def url(self):
        return f"http://127.0.0.1:{self.port}"

    def stop(self):
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()


def wrk(server, seconds, connections, script=None, path="/health"):
    command = ["wrk", "-t2", f"-c{connections}", f"-d{seconds}s"]
    if script:
        command += ["-s", os.path.join(HTTP, script)]
    output = subprocess.run(command + [server.url() + path], capture_output=True, text=True,
                            env={**os.environ, "KEY": server.key}).stdout
    match = re.search(r"Requests/sec:\s+([\d.]+)", output)
    return float(match.group(1)) if match else 0.0


def count_median(server, trials=200):
    connection = http.client.HTTPConnection("127.0.0.1", server.port)
    body = json.dumps({"condition": CONDITION, "countOnly": True})
    headers = {"Authorization": f"key={server.key}", "Content-Type": "application/json"}
    times, count = [], None
    for _ in range(trials):
        start = time.perf_counter()
        connection.request("POST", "/api/audiences:resolve", body, headers)
        count = json.loads(connection.getresponse().read())["count"]
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), count


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--old", required=True)
    parser.add_argument("--new", required=True)
    parser.add_argument("--seconds", type=int, default=10)
    parser.add_argument("--tokens", type=int, default=1_000_000)
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--subscriptions", type=int, default=5_000_000)
    args = parser.parse_args()
    folder = tempfile.mkdtemp(prefix="compare-")
    builds = {"old": args.old, "new": args.new}
    rows = []
    try:
        for name, binary in builds.items():
            server = Server(binary, os.path.join(folder, f"small-{name}.sqlite"))
            health = wrk(server, args.seconds, 64)
            creates = wrk(server, args.seconds, 64, "group-create.lua", "/")
            server.stop()
            rows.append((name, "group creates/s vs GET /health", f"{creates:.0f} vs {health:.0f} = {creates / health:.1%}"))

        big = os.path.join(folder, "big-old.sqlite")
        started = time.time()
        generated = subprocess.run(
            [args.old, "generate", "--db", big, "--tokens", str(args.tokens), "--topics", str(args.topics),
             "--subscriptions", str(args.subscriptions), "--seed", "1"], check=True, capture_output=True, text=True)
        key = json.loads(generated.stdout[generated.stdout.index("{"):])["server_key"]
        print(f"generated {args.tokens} tokens / {args.topics} topics / {args.subscriptions} subscriptions "
              f"in {time.time() - started:.0f} s")
        shutil.copy(big, os.path.join(folder, "big-new.sqlite"))
        for name, binary in builds.items():
            database = os.path.join(folder, f"big-{name}.sqlite")
            server = Server(binary, database, key=key)
            median, count = count_median(server)
            batch = wrk(server, args.seconds * 2, 4, "batch-add.lua", "/")
            server.stop()
            rows.append((name, "batchAdd subscriptions/s (1000 per request)", f"{batch * 1000:.0f}"))
            rows.append((name, "5-topic condition count, median", f"{median:.2f} ms (count {count})"))
        print()
        print("| build | what | result |")
        print("|---|---|---|")
        for row in rows:
            print("| " + " | ".join(row) + " |")
    finally:
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    main()
