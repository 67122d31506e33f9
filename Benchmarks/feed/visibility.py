#!/usr/bin/env python3
"""How long a write through one `serve` process takes to show in another's audiences.

Starts two servers on one fresh database file, subscribes a new token to a topic through the
first (`POST /iid/v1:batchAdd`), and polls the second's `POST /api/audiences:resolve` for that
topic until the count says so. Reports the delay's p50, p99 and max over the trials, and the
same for the writer's own index (read-your-writes: expected 0 polls).

    python3 Benchmarks/feed/visibility.py --binary .build/release/fcm-registry --trials 300
"""
import argparse
import http.client
import json
import os
import socket
import statistics
import subprocess
import tempfile
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_for(port, deadline=30):
    start = time.time()
    while time.time() - start < deadline:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", port, timeout=1)
            connection.request("GET", "/health")
            if connection.getresponse().status == 200:
                return
        except OSError:
            time.sleep(0.05)
    raise SystemExit(f"server on port {port} did not start")


def call(connection, key, path, body):
    connection.request("POST", path, json.dumps(body), {"Authorization": f"key={key}", "Content-Type": "application/json"})
    response = connection.getresponse()
    return json.loads(response.read())


def percentile(values, p):
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--binary", default=".build/release/fcm-registry")
    parser.add_argument("--trials", type=int, default=300)
    args = parser.parse_args()

    folder = tempfile.mkdtemp(prefix="visibility-")
    database = os.path.join(folder, "registry.sqlite")
    key_file = os.path.join(folder, "key.json")
    ports = [free_port(), free_port()]
    servers = [
        subprocess.Popen([args.binary, "serve", "--port", str(ports[0]), "--db", database, "--key-file", key_file,
                          "--log-level", "warning"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ]
    try:
        wait_for(ports[0])
        servers.append(subprocess.Popen([args.binary, "serve", "--port", str(ports[1]), "--db", database,
                                         "--log-level", "warning"], stdout=subprocess.DEVNULL,
                                        stderr=subprocess.DEVNULL))
        wait_for(ports[1])
        key = json.load(open(key_file))["server_key"]
        writer = http.client.HTTPConnection("127.0.0.1", ports[0])
        reader = http.client.HTTPConnection("127.0.0.1", ports[1])
        delays, own = [], []
        for trial in range(args.trials):
            topic = f"visibility-{trial}"
            call(writer, key, "/iid/v1:batchAdd", {"to": f"/topics/{topic}",
                                                   "registration_tokens": [f"token{trial}:APA91bxxxxxxxx"]})
            written = time.perf_counter()
            if call(writer, key, "/api/audiences:resolve", {"topic": topic, "countOnly": True})["count"] != 1:
                own.append(trial)
            while call(reader, key, "/api/audiences:resolve", {"topic": topic, "countOnly": True})["count"] != 1:
                pass
            delays.append((time.perf_counter() - written) * 1000)
        print(f"trials: {args.trials}")
        print(f"visible in the other server after: p50 {statistics.median(delays):.2f} ms, "
              f"p99 {percentile(delays, 99):.2f} ms, max {max(delays):.2f} ms")
        print(f"writes missing from the writer's own index right after the write: {len(own)}")
    finally:
        for server in servers:
            server.terminate()
        for server in servers:
            server.wait(timeout=20)


if __name__ == "__main__":
    main()
